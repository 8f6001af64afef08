"""Glob paths that name fields of a tool result, such as ``contacts[].email`` or ``*.phone``.

A path is a dot-separated list of dict keys from the root of the result. Lists are transparent:
``[]`` after a key (or alone, for a list at the root) may be written for readability and is
ignored. In a segment ``*`` matches any run of characters and ``?`` one character; a whole
segment ``**`` matches any number of keys (``**.email`` is an ``email`` key at any depth). A
pattern matches the value at its end and everything below it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["FieldMatcher", "parse_field_pattern"]

_ANY_DEPTH = "**"
State = frozenset[tuple[int, int]]


def parse_field_pattern(pattern: str) -> tuple[str, ...]:
    """Split a pattern into segments; raise ``ValueError`` saying what is wrong."""
    text = pattern.strip()
    if not text:
        raise ValueError("a field pattern cannot be empty")
    segments: list[str] = []
    for raw in text.split("."):
        segment = raw
        while segment.endswith("[]"):
            segment = segment[:-2]
        if not segment:
            if raw.startswith("[]") and not segments:
                continue  # "[].email": a list at the root
            raise ValueError(f"empty key in field pattern {pattern!r} (write e.g. 'a.b[].c')")
        if "[" in segment or "]" in segment:
            raise ValueError(f"'[' and ']' in {pattern!r} may only form '[]' after a key")
        if "**" in segment and segment != _ANY_DEPTH:
            raise ValueError(f"'**' in {pattern!r} must be a whole segment, as in '**.email'")
        segments.append(segment)
    if not segments:
        raise ValueError(f"field pattern {pattern!r} names no key")
    return tuple(segments)


def _segment_regex(segment: str) -> re.Pattern[str]:
    parts = (".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in segment)
    return re.compile("".join(parts), re.DOTALL)


class FieldMatcher:
    """Matches result paths against patterns incrementally, one key at a time.

    ``start`` is the state at the root; ``step(state, key)`` the state below ``key``;
    ``matched(state)`` whether some pattern ends here. Steps are cached per (state, key).
    """

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = tuple(parse_field_pattern(p) for p in patterns)
        self._regexes = tuple(tuple(_segment_regex(s) for s in p) for p in self.patterns)
        self.start: State = self._closure({(index, 0) for index in range(len(self.patterns))})
        self._steps: dict[tuple[State, str], State] = {}

    def _closure(self, positions: set[tuple[int, int]]) -> State:
        # A "**" may match zero keys: a position before it also stands after it.
        todo = list(positions)
        while todo:
            index, pos = todo.pop()
            segments = self.patterns[index]
            if pos < len(segments) and segments[pos] == _ANY_DEPTH:
                after = (index, pos + 1)
                if after not in positions:
                    positions.add(after)
                    todo.append(after)
        return frozenset(positions)

    def step(self, state: State, key: str) -> State:
        if not state:
            return state
        cached = self._steps.get((state, key))
        if cached is not None:
            return cached
        nxt: set[tuple[int, int]] = set()
        for index, pos in state:
            segments = self.patterns[index]
            if pos >= len(segments):
                continue
            if segments[pos] == _ANY_DEPTH:
                nxt.add((index, pos))
            elif self._regexes[index][pos].fullmatch(key):
                nxt.add((index, pos + 1))
        result = self._closure(nxt)
        if len(self._steps) < 4096:
            self._steps[(state, key)] = result
        return result

    def matched(self, state: State) -> bool:
        return any(pos == len(self.patterns[index]) for index, pos in state)

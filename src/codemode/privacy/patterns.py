"""The places a LIKE or GLOB pattern fixes in the text it matches, for the oracle guard.

``____k%`` says the fifth character is ``k``; ``??[a-m]*`` says the third is one of a to m;
``jo_d%`` fixes the first, second and fourth. A pattern fixes the places before its first
``%`` or ``*``; without one, it fixes every place of a text of exactly its length. Patterns
are read from a whole argument and from each quoted literal inside it, so a probe written
into a query (``... WHERE email LIKE '____k%'``) is read as the probe it is. A SQL
``substr(column, N, ...)`` compared with a literal fixes places too: ``= 'kx'`` the N-th and
the next, ``< 'm'`` the N-th as one of the characters below ``m``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Pattern", "patterns_in"]

_QUOTED = re.compile(r"'((?:[^']|'')*)'|\"([^\"]*)\"")
_WILDCARDS = frozenset("%*_?[")
_SUBSTR = re.compile(
    r"substr(?:ing)?\s*\(\s*[\w.\"`\[\]]+\s*,\s*(\d+)\s*(?:,\s*\d+\s*)?\)\s*"
    r"(==|=|<=|>=|<|>|like|glob)\s*'((?:[^']|'')*)'"
)
_PRINTABLE = frozenset(chr(c) for c in range(32, 127))
#: One place: a character, a class of characters, or ``None`` for any character.
Place = str | frozenset[str] | None


@dataclass(frozen=True, slots=True)
class Pattern:
    """The places a pattern fixes from the start of the text; ``open``: a ``%`` or ``*``
    follows them (the text may be longer); ``inside``: read from within a longer argument (a
    query), where it may be compared with any column, not only with the hidden value."""

    places: tuple[Place, ...]
    open: bool
    inside: bool = False

    def fixes(self, text: str) -> list[int] | None:
        """The indexes of ``text`` this pattern fixes, or None when it cannot match ``text``."""
        if len(self.places) > len(text) or (not self.open and len(self.places) != len(text)):
            return None
        fixed = []
        for at, place in enumerate(self.places):
            if place is None:
                continue
            if text[at] not in place:  # a character is a class of one
                return None
            fixed.append(at)
        return fixed


def patterns_in(text: str, *, longest: int) -> Iterator[Pattern]:
    """The patterns ``text`` (already folded) holds: itself, and each quoted literal inside it
    that has a wildcard. Places beyond ``longest`` are not read (no value is that long)."""
    candidates = [text]
    if "'" in text or '"' in text:
        for match in _QUOTED.finditer(text):
            literal = match.group(1) if match.group(1) is not None else match.group(2)
            candidates.append(literal.replace("''", "'"))
    for number, candidate in enumerate(candidates):
        if _WILDCARDS.isdisjoint(candidate):
            continue
        pattern = _parse(candidate, longest + 1)
        if pattern is not None and any(place is not None for place in pattern.places):
            yield Pattern(pattern.places, pattern.open, inside=number > 0)
    if "substr" in text:
        yield from _substrings(text, longest)


def _substrings(text: str, longest: int) -> Iterator[Pattern]:
    """``substr(email, 5, 1) = 'k'``, ``substr(email, 5, 1) < 'm'``: places a comparison of a
    SQL substring with a literal fixes."""
    for match in _SUBSTR.finditer(text):
        start, operator, literal = int(match.group(1)), match.group(2), match.group(3)
        if not 1 <= start <= longest or not literal:
            continue
        before: tuple[Place, ...] = (None,) * (start - 1)
        if operator in ("=", "=="):
            yield Pattern(before + tuple(literal.replace("''", "'")), open=True, inside=True)
        elif operator in ("like", "glob"):
            pattern = _parse(literal, longest + 1)
            if pattern is not None and pattern.places:
                yield Pattern(before + pattern.places, open=True, inside=True)
        elif len(literal) == 1:  # a bisection of one place
            below = operator.startswith("<")
            edge = literal if operator in ("<=", ">=") else ""
            chars = {c for c in _PRINTABLE if (c < literal if below else c > literal)}
            yield Pattern((*before, frozenset(chars | set(edge))), open=True, inside=True)


def _parse(text: str, limit: int) -> Pattern | None:
    places: list[Place] = []
    at = 0
    while at < len(text) and len(places) < limit:
        char = text[at]
        if char in "%*":
            return Pattern(tuple(places), open=True)
        if char in "_?":
            places.append(None)
        elif char == "[":
            end = text.find("]", at + 2)
            if end < 0:
                return None
            places.append(_class(text[at + 1 : end]))
            at = end
        else:
            places.append(char)
        at += 1
    if len(places) >= limit:
        return None
    return Pattern(tuple(places), open=False)


def _class(body: str) -> frozenset[str]:
    """``a-m0-9.``: the characters of a GLOB class (a leading ``^`` or ``!`` negates it, which
    fixes nothing useful here: such a class counts as any character but those)."""
    negated = body[:1] in ("^", "!")
    if negated:
        body = body[1:]
    chars: set[str] = set()
    at = 0
    while at < len(body):
        if at + 2 < len(body) and body[at + 1] == "-":
            chars.update(chr(c) for c in range(ord(body[at]), ord(body[at + 2]) + 1))
            at += 3
        else:
            chars.add(body[at])
            at += 1
    if negated:
        return frozenset(chr(c) for c in range(32, 127)) - chars
    return frozenset(chars)

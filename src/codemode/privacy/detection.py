"""What a detector is and what it finds: ``Detector`` (a candidate regex and a check) and
``Detection`` (a value and its span). ``detectors``, ``markup`` and ``fastscan`` all build on
these, and on nothing of one another's beyond them."""

from __future__ import annotations

import functools
import importlib
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

__all__ = [
    "Detection",
    "Detector",
    "Found",
    "Validator",
    "detection",
    "detections",
    "match_widths",
]

Validator = Callable[[re.Match[str]], bool]


@dataclass(frozen=True, slots=True)
class Detection:
    """One detected value: ``text[start:end] == value``, except for a value that markup split
    (``maria@[globex].example.com``): there ``value`` is without the markup and the span
    covers it."""

    kind: str
    start: int
    end: int
    value: str


@dataclass(frozen=True, slots=True)
class Detector:
    """A candidate regex and an optional check. The value is group ``value`` if the regex has it."""

    kind: str
    pattern: re.Pattern[str]
    validate: Validator | None = None

    def find(self, text: str) -> Iterable[Detection]:
        """Every match its check accepts. After one it turns down, the search goes on from the
        next character, not from the match's end: a value may start inside a run that is
        none ("86 095 742 719 020 7946 0958" is no phone number, but ends with one)."""
        has_group = "value" in self.pattern.groupindex
        search, validate = self.pattern.search, self.validate
        match = search(text)
        while match is not None:
            if validate is not None and not validate(match):
                match = search(text, match.start() + 1)
                continue
            start, end = match.span("value") if has_group else match.span()
            if end > start:
                yield Detection(self.kind, start, end, text[start:end])
            match = search(text, max(match.end(), match.start() + 1))


#: A finding as a plain tuple, ``(kind, start, end, value)``: what the fast path keeps until it
#: knows which findings survive merging and markup (a tuple costs a tenth of a ``Detection``).
Found = tuple[str, int, int, str]

_new = object.__new__
_SETTERS = tuple(Detection.__dict__[name].__set__ for name in ("kind", "start", "end", "value"))
_SET_KIND, _SET_START, _SET_END, _SET_VALUE = _SETTERS


def detections(found: Sequence[Found]) -> tuple[Detection, ...]:
    """``detection`` of each of ``found``, a field at a time: each slot's setter runs from
    ``map`` in C, with no Python call per value (a fifth less time for thousands)."""
    if not found:
        return ()
    items = list(map(_new, repeat(Detection, len(found))))
    for setter, values in zip(_SETTERS, zip(*found, strict=True), strict=True):
        deque(map(setter, items, values), maxlen=0)
    return tuple(items)


def detection(found: Found) -> Detection:
    """``Detection(*found)`` in about half the time: the frozen class's ``__init__`` sets each
    field through ``object.__setattr__``; this sets its slots directly (thousands per MB)."""
    item = _new(Detection)
    _SET_KIND(item, found[0])
    _SET_START(item, found[1])
    _SET_END(item, found[2])
    _SET_VALUE(item, found[3])
    return item


# Python's own bound on a repeat: a pattern whose longest match reaches it has no bound.
_NO_BOUND = 1 << 32


@functools.cache
def match_widths(pattern: re.Pattern[str]) -> tuple[int, int | None]:
    """The fewest and the most characters a match of ``pattern`` takes: ``(0, None)`` where
    that is not known, the most None where no bound holds (``+``, ``*``, ``{n,}``)."""
    try:
        parser: Any = importlib.import_module("re._parser")
        low, high = parser.parse(pattern.pattern, pattern.flags).getwidth()
    except (ImportError, AttributeError):  # pragma: no cover - a Python without it
        return 0, None
    return int(low), (int(high) if high < _NO_BOUND else None)

"""What a detector is and what it finds: ``Detector`` (a candidate regex and a check) and
``Detection`` (a value and its span). ``detectors``, ``markup`` and ``fastscan`` all build on
these, and on nothing of one another's beyond them."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["Detection", "Detector", "Validator"]

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
        has_group = "value" in self.pattern.groupindex
        for match in self.pattern.finditer(text):
            if self.validate is not None and not self.validate(match):
                continue
            start, end = match.span("value") if has_group else match.span()
            if end > start:
                yield Detection(self.kind, start, end, text[start:end])

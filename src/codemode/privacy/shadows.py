"""Spans of a text that the detectors found, which a fragment strictly inside cannot beat.

The tokenizer merges the recall's hits with the detectors' findings, the longer span winning
(``tokenizer._merge``). A new address in a note (``wrote to user50007@example7.com``) shares its
tail with every address of the vault that ends the same way (``user1007@example7.com``): each
one is a fragment there by the recall's rules, found and judged one by one, and each loses to
the address the detectors found around it. With 100,000 addresses read that was a millisecond
per note, growing with every address read.

``Shadows`` lets the recall skip a value's common run that lies strictly inside a detected span
(it can only make a shorter hit inside it, which loses) and tells afterwards whether skipping
could have changed anything: when a hit it did make overlaps such a span and is at least as
long, or a value it skipped a run of matched again elsewhere (where the skipped run's hit
would have stopped it), the caller searches again without shadows. Either way the tokenizer
keeps exactly what it kept before.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from itertools import pairwise

from codemode.privacy.skeletons import skeleton_of

__all__ = ["Shadows"]


class Shadows:
    """Detected spans of one text, in the text and in its skeleton (built per search)."""

    __slots__ = ("_ends", "_starts", "_text_spans", "pruned", "skipped_values", "spoiled")

    def __init__(self, text_spans: list[tuple[int, int]], lowered: str) -> None:
        self._text_spans = text_spans
        self._starts: list[int] = []
        self._ends: list[int] = []
        at = count = 0  # skeleton characters before ``at``, counted a piece at a time
        for start, end in text_spans:
            count += len(skeleton_of(lowered[at:start]))
            self._starts.append(count)
            count += len(skeleton_of(lowered[start:end]))
            self._ends.append(count)
            at = end
        self.pruned: set[int] = set()  # the spans a run was skipped inside
        self.skipped_values: set[int] = set()  # the values (recall indexes) it was skipped for
        self.spoiled = False  # a skipped value matched again: search again without shadows

    @classmethod
    def of(cls, spans: Iterable[tuple[int, int]], text: str, lowered: str) -> Shadows | None:
        """Shadows of ``spans`` (sorted by position, none overlapping another), or None where
        there are none or they cannot be used: ``lowered`` must keep ``text``'s offsets."""
        ordered = sorted(spans)
        if not ordered or len(lowered) != len(text):
            return None
        for (_, end), (start, _) in pairwise(ordered):
            if start < end:
                return None  # overlapping findings: the merge may drop one of them
        return cls(ordered, lowered)

    def skip(self, value: int, low: int, high: int) -> bool:
        """Whether a run ``[low, high)`` of the text's skeleton, of the recall's value
        ``value``, lies strictly inside a span: then it is skipped, and that is remembered."""
        inside = self.holding(low, high)
        if inside is None:
            return False
        self.pruned.add(inside)
        self.skipped_values.add(value)
        return True

    def holding(self, low: int, high: int) -> int | None:
        """The span whose skeleton strictly holds ``[low, high)`` of the text's skeleton
        (holds it, and is not the same span), or None."""
        at = bisect.bisect_right(self._starts, low) - 1
        if at < 0:
            return None
        start, end = self._starts[at], self._ends[at]
        if high <= end and (low, high) != (start, end):
            return at
        return None

    def overtaken(self, hits: Sequence[tuple[int, int]]) -> bool:
        """Whether one of ``hits`` (text spans) overlaps a span a run was skipped inside and is
        at least as long: the merge might then drop that span, and keep a skipped hit it
        would have dropped. Not a hit of exactly that span (a value seen before, found again
        where the detectors found it): every skipped hit overlaps it, kept or dropped, and
        what could drop it overlaps the span too (and is looked at here)."""
        for index in self.pruned:
            start, end = self._text_spans[index]
            for hit_start, hit_end in hits:
                across = (
                    hit_start < end and start < hit_end and (hit_start, hit_end) != (start, end)
                )
                if across and hit_end - hit_start >= end - start:
                    return True
        return False

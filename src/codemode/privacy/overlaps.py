"""Where findings overlap: ``merge_overlaps`` joins the fast path's (found kind by kind) into one
span of the better-ranked kind; ``non_overlapping`` and ``keep_found_apart`` keep, in priority
order, each that overlaps none kept before it."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from itertools import islice
from operator import attrgetter, itemgetter

from codemode.privacy.detection import Detection, Found, detection

__all__ = ["keep_found_apart", "merge_overlaps", "non_overlapping"]

_START, _END = itemgetter(1), itemgetter(2)
_START_OF = attrgetter("start")


def merge_overlaps(text: str, found: list[Found], rank: Mapping[str, int]) -> list[Found]:
    """Overlapping findings become one, spanning both, of the better-ranked kind (lower
    ``rank``): the fast path scans kind by kind, so where kinds compete (``+4915112345678`` is
    a phone number and holds a card-shaped run) it hides the union rather than choose."""
    if len(found) <= 1:
        return found
    # By start, the longest first (two stable sorts with C keys: no Python call per item).
    found.sort(key=_END, reverse=True)
    found.sort(key=_START)
    last = found[0]
    merged: list[Found] = [last]
    last_end = last[2]
    for item in islice(found, 1, None):
        if item[1] >= last_end:  # the common case: apart from the one before
            merged.append(item)
            last, last_end = item, item[2]
            continue
        kind, _start, end, _value = item
        first = rank[last[0]] <= rank[kind]
        if end <= last_end and first:
            continue
        last_end, start = max(last_end, end), last[1]
        last = merged[-1] = (last[0] if first else kind, start, last_end, text[start:last_end])
    return merged


def non_overlapping(found: Iterable[Detection]) -> list[Detection]:
    """Keep each detection (given in priority order) that overlaps none kept before it.

    The result is sorted by position. Kept spans never overlap, so a new one need only be
    compared with its neighbours: O(n log n) even for text with thousands of detections.
    """
    kept: list[Detection] = []
    starts: list[int] = []
    for item in found:
        index = bisect.bisect_left(starts, item.start)
        if index > 0 and kept[index - 1].end > item.start:
            continue
        if index < len(kept) and kept[index].start < item.end:
            continue
        starts.insert(index, item.start)
        kept.insert(index, item)
    return kept


def keep_found_apart(kept: list[Detection], found: Iterable[Found]) -> list[Detection]:
    """``non_overlapping`` of ``found`` after ``kept`` (sorted by position, none overlapping):
    a ``Detection`` is made only for each finding kept (most overlap one kept already)."""
    starts = list(map(_START_OF, kept))  # thousands in dense text: no Python call per item
    for item in found:
        _kind, start, end, _value = item
        index = bisect.bisect_left(starts, start)
        if index > 0 and kept[index - 1].end > start:
            continue
        if index < len(kept) and kept[index].start < end:
            continue
        starts.insert(index, start)
        kept.insert(index, detection(item))
    return kept

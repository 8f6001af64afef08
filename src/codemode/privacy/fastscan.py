"""The fast path for long text: run each detector only in small windows around cheap anchors.

Python's ``re`` pays for every position a pattern is tried at, and every built-in pattern opens
with a look-behind, so scanning 1 MB with all of them costs seconds. Almost every position can
be ruled out by something much cheaper that each match must contain:

``@``                 EMAIL (found with ``str.find``; the window is the run of address
                      characters on each side)
key prefixes          SECRET's ``sk_live_``, ``ghp_``, ``AKIA``, ``eyJ``, ``-----BEGIN`` ...
keywords              SECRET after ``key``/``secret``/``token``/``pass``/``pwd``/``auth``/
                      ``bearer`` (searched in a lower-cased byte copy)
``+``                 international PHONE numbers (the run of digits and separators after)
``.d.d``              IPv4 (in a byte map of digits and dots)
``:h:`` or ``::``     IPv6 (the run of hex digits, colons and dots around)
six digits            the other number kinds: runs of at least six digits with gaps of at most
                      three characters, found in a byte map where every digit is ``0``; each
                      kind keeps the runs with as many digits as it needs (CARD 13, DE_TAX_ID
                      11, SSN and PHONE 9), and UK_NINO, ES_DNI and IBAN only runs with the
                      letters of their shape in or near them.

The patterns of a kind that share an anchor then run as on the whole text (joined as in
``detectors._Scanner``), restricted to the merged windows around their anchor. A window is
wider than any match can reach from the anchor, and matches touching a window's far edge are
dropped (they were cut by the window; the window of their own anchor finds them whole). Where
findings overlap, ``DetectorSet`` merges them into one span rather than choose.
``tests/privacy/test_fastscan.py`` checks, over generated text, that everything the whole-text
scan hides, the fast path hides too; ``test_fastscan_texts.py`` that on the benchmark's texts
both find exactly the same.

The pure-Python anchors live in ``codemode.privacy.anchors``. With Hyperscan installed
(``codemode.privacy.native``) every anchor comes from one native pass instead, number kinds
with anchors shaped like their pattern (no six-digit clusters), and the places where markup
may be come from the same pass. The short windows markup is removed from (``markup``) are
then scanned together, joined into one text for one more native pass (``scan_parts``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import cast

from codemode.privacy.anchors import NATIVE_RUNS, Anchor, RunWindow, python_anchor_of
from codemode.privacy.detection import Detector, Found, match_widths
from codemode.privacy.markup import near_change
from codemode.privacy.native import ANCHORS, NativeAnchor, native_scanner
from codemode.privacy.scantext import ScanText, Window

_Text = ScanText  # the name the tests know it by

__all__ = [
    "FAST_MIN_CHARS",
    "WindowedKind",
    "native_available",
    "scan",
    "scan_parts",
    "windowed_kinds",
]

#: Below this length the whole-text scan is as fast (and its results are cached).
FAST_MIN_CHARS = 2048
_EDGE = 8  # a match ending this close to a window's far edge was cut by it


NativeWindows = Callable[[ScanText, Sequence[int]], list[Window]]
#: A window in one part of a text: ``(part, start, end)`` (a text scanned alone is part 0).
Framed = tuple[int, int, int]


class _AroundEnds:
    """The windows ``(end - back, end + forward)`` around an anchor's native hits. Merged, they
    leave out those whose every hit has a ``dead`` character ``lead`` before its end
    (``NativeAnchor``): every match their search could find is placed so by one of their own
    hits, and its check turns it down."""

    def __init__(self, anchor: NativeAnchor) -> None:
        self.back, self.forward = anchor.back, anchor.forward
        self.lead, self.dead = anchor.lead, anchor.dead

    def __call__(self, _source: ScanText, ends: Sequence[int]) -> list[Window]:
        back, forward = self.back, self.forward
        return [(end - back, end + forward) for end in ends]

    def merged(self, ends: Sequence[int], size: int, raw: bytes) -> list[Framed]:
        """``_merged`` of the windows around ``ends`` in a text ``size`` long (``raw``: its
        ASCII copy), from the ends alone (no tuple per hit to make and sort: thousands of
        hits in dense text), but those that find nothing (``dead``)."""
        if not ends:
            return []
        back, reach, lead, dead = self.back, self.forward + _EDGE, self.lead, self.dead
        ordered = sorted(ends)
        low, high = max(0, ordered[0] - back), ordered[0] + reach
        live = not dead
        merged: list[Framed] = []
        for end in ordered:
            if end - back > high:
                if live:
                    merged.append((0, low, high))
                low, live = end - back, not dead
            high = end + reach  # in order of their ends, so of their reaches too
            if not live:
                live = raw[end - lead] not in dead
        if live:
            merged.append((0, low, min(size, high)))
        return merged

    def merged_parts(
        self, ends: Sequence[int], parts: Sequence[Window], raw: bytes
    ) -> list[Framed]:
        """``_merged_parts`` of the windows around ``ends``, from the ends alone, but those
        that find nothing (``merged``)."""
        back, reach, lead, dead = self.back, self.forward + _EDGE, self.lead, self.dead
        merged: list[Framed] = []
        part, current, low, high, live = 0, -1, 0, 0, False
        for end in sorted(ends):
            while parts[part][1] < end:  # as in ``_merged_parts``
                part += 1
            start = end - back
            if part != current:
                if live:
                    merged.append((current, low, min(parts[current][1], high)))
                current, low, live = part, max(parts[part][0], start), not dead
            elif start > high:
                if live:
                    merged.append((current, low, high))
                low, live = start, not dead
            high = end + reach  # in order of their ends, so of their reaches too
            if not live:
                live = raw[end - lead] not in dead
        if live:
            merged.append((current, low, min(parts[current][1], high)))
        return merged


def _native_runs(offset: int, window: RunWindow) -> NativeWindows:
    def windows(source: ScanText, ends: Sequence[int]) -> list[Window]:
        return window(source, [end - offset for end in ends])

    return windows


@functools.cache
def _native_anchor_of(kind: str, index: int) -> tuple[NativeWindows, int] | None:
    """The windows around the Hyperscan hits of a built-in pattern's anchor
    (``codemode.privacy.native``) and the slot of its hits, if it has one."""
    scanner = native_scanner()
    slot = scanner.slot(kind, index) if scanner is not None else None
    if scanner is None or slot is None:
        return None
    anchor = ANCHORS[kind, index]
    if anchor.at is not None:
        return _native_runs(anchor.at, NATIVE_RUNS[kind, index]), slot
    return _AroundEnds(anchor), slot


def _anchor_of(
    kind: str, index: int, native: bool = False
) -> tuple[Anchor | NativeWindows | None, int | None]:
    """The anchor of the ``index``-th built-in pattern of ``kind`` (None: the whole text);
    with ``native``, Hyperscan's where it has one, with the slot of its hits."""
    if native:
        found = _native_anchor_of(kind, index)
        if found is not None:
            return found
    return python_anchor_of(kind, index), None


def _merged(windows: Iterable[Window], size: int) -> list[Framed]:
    """``windows`` in order, overlapping ones joined, each reaching ``_EDGE`` further (room for
    the cut-off check) and clipped to the text (``size`` long)."""
    spans = sorted(windows)  # anchors mostly find them in order: little left to sort
    if not spans:
        return []
    merged: list[Framed] = []
    low, high = spans[0]
    low, high = max(0, low), high + _EDGE
    for start, stop in spans:
        reach = stop + _EDGE
        if start > high:
            merged.append((0, low, high))
            low, high = start, reach
        elif reach > high:
            high = reach
    # Only the last can reach past the end: every window starts before it (at its anchor).
    merged.append((0, low, min(size, high)))
    return merged


def _merged_parts(
    windows: Sequence[Window], ends: Sequence[int], parts: Sequence[Window]
) -> list[Framed]:
    """``_merged`` for each part of a text: ``windows`` around the native hits ``ends`` (in
    order), each in the part its hit ends in, joined and clipped within that part."""
    framed: list[Framed] = []
    part = 0
    for (start, stop), end in zip(windows, ends, strict=True):
        while parts[part][1] < end:  # a hit ends inside its part: no anchor ends in a separator
            part += 1
        framed.append((part, start, stop))
    framed.sort()
    merged: list[Framed] = []
    current, low, high = -1, 0, 0
    for part, start, stop in framed:
        reach = stop + _EDGE
        if part != current:
            if current >= 0:
                merged.append((current, low, min(parts[current][1], high)))
            current, low, high = part, max(parts[part][0], start), reach
        elif start > high:
            merged.append((current, low, high))
            low, high = start, reach
        elif reach > high:
            high = reach
    if current >= 0:
        merged.append((current, low, min(parts[current][1], high)))
    return merged


class _Group:
    """The patterns of one kind that share an anchor, joined as in ``detectors._Scanner``."""

    def __init__(
        self,
        anchor: Anchor | NativeWindows | None,
        detectors: Sequence[Detector],
        slot: int | None = None,
    ) -> None:
        self.slot = slot  # of the anchor's native hits: no hits, nothing to verify
        self.anchor: Anchor | None = None
        self.native: NativeWindows | None = None
        if slot is None:
            self.anchor = cast("Anchor | None", anchor)
        else:
            self.native = cast(NativeWindows, anchor)
        joinable = [d for d in detectors if not d.pattern.groupindex]
        self.joined = tuple(joinable) if len(joinable) > 1 else ()
        self.separate = tuple(d for d in detectors if d not in self.joined)
        branches = "|".join(f"(?P<_{i}>{d.pattern.pattern})" for i, d in enumerate(self.joined))
        self.combined = re.compile(branches) if self.joined else None

    def find_into(self, source: ScanText, found: list[Found]) -> None:
        text = source.text
        size = len(text)
        windows: list[Framed]
        if self.native is not None:
            scanner = native_scanner()
            assert scanner is not None and self.slot is not None
            ends = source.native_hits(scanner)[self.slot]
            if isinstance(self.native, _AroundEnds):
                windows = self.native.merged(ends, size, source.raw)
            else:
                windows = _merged(self.native(source, ends), size)
        elif self.anchor is not None:
            windows = _merged(self.anchor(source), size)
        else:
            windows = [(0, 0, size)]
        self._search(text, windows, ((0, size),), (found,))

    def find_in_parts(
        self,
        source: ScanText,
        ends: Sequence[int],
        parts: Sequence[Window],
        found: Sequence[list[Found]],
        changes: Sequence[int] | None = None,
    ) -> None:
        """``find_into`` for each part of ``source.text`` alone (``parts``: their spans, in
        order; ``found``: a list for each), from the native hits of this group's anchor;
        with ``changes`` (places in ``source.text``, in order) only in the windows near one."""
        assert self.native is not None
        if isinstance(self.native, _AroundEnds):
            windows = self.native.merged_parts(ends, parts, source.raw)
        else:
            windows = _merged_parts(self.native(source, ends), ends, parts)
        if changes is not None:
            windows = _near_changes(windows, changes)
        self._search(source.text, windows, parts, found)

    def _search(
        self,
        text: str,
        windows: Sequence[Framed],
        parts: Sequence[Window],
        found: Sequence[list[Found]],
    ) -> None:
        if self.combined is not None:
            for part, low, high in windows:
                self._joined(text, (low, high), parts[part], found[part])
        for detector in self.separate:
            _find(detector, text, windows, parts, found)

    def _joined(self, text: str, window: Window, part: Window, found: list[Found]) -> None:
        assert self.combined is not None
        (low, high), (offset, size) = window, part
        limit = high - _EDGE if high < size else high
        mark = len(found)
        for match in self.combined.finditer(text, low, high):
            detector = self.joined[int(match.lastgroup[1:])] if match.lastgroup else None
            # Turned down or cut by the edge: a value may start inside it (``_find``).
            if (
                detector is None
                or match.end() > limit
                or (detector.validate is not None and not detector.validate(match))
            ):
                del found[mark:]
                for one in self.joined:
                    _find(one, text, [(0, low, high)], (part,), (found,))
                return
            start, end = match.start() - offset, match.end() - offset
            found.append((detector.kind, start, end, match.group()))


def _near_changes(windows: Sequence[Framed], changes: Sequence[int]) -> list[Framed]:
    """The windows that may hold a value near a change (``changes``, in order): every match
    a window holds lies within it."""
    return [window for window in windows if near_change(changes, window[1], window[2])]


class WindowedKind:
    """One kind's built-in patterns, each group run in the windows around its anchor."""

    def __init__(self, kind: str, detectors: Sequence[Detector], *, native: bool) -> None:
        self.kind = kind
        by_anchor: dict[tuple[Anchor | NativeWindows | None, int | None], list[Detector]] = {}
        for index, detector in enumerate(detectors):
            by_anchor.setdefault(_anchor_of(kind, index, native), []).append(detector)
        self.groups = tuple(_Group(key[0], members, key[1]) for key, members in by_anchor.items())
        self.native = any(group.slot is not None for group in self.groups)
        self.all_native = all(group.slot is not None for group in self.groups)


def _find(
    detector: Detector,
    text: str,
    windows: Sequence[Framed],
    parts: Sequence[Window],
    found: Sequence[list[Found]],
) -> None:
    """``detector``'s matches in each window, into the list of its part (positions count from
    the part's start), but those cut by the window's far edge (``_EDGE``) before the part's
    end."""
    search, validate, kind = detector.pattern.search, detector.validate, detector.kind
    has_group = "value" in detector.pattern.groupindex
    shortest = _shortest(detector.pattern)
    current, offset, size = -1, 0, 0
    append = found[0].append
    for part, low, high in windows:
        # Most windows hold one match or none: ``search`` costs less than ``finditer`` there.
        match = search(text, low, high)
        if match is None:
            continue
        if part != current:  # windows come in order of their parts
            current, (offset, size) = part, parts[part]
            append = found[part].append
        limit = high - _EDGE if high < size else high
        while True:
            end = match.end()
            if end <= limit and (validate is None or validate(match)):
                start, stop = match.span("value") if has_group else (match.start(), end)
                if stop > start:
                    append((kind, start - offset, stop - offset, text[start:stop]))
                resume = end
            else:
                # Turned down, or cut by the edge (not reported): as ``Detector.find``, a value
                # may start inside it.
                resume = match.start() + 1
            # A match from here on would end beyond ``limit``: cut by the edge, not reported.
            if resume + shortest > limit:
                break
            match = search(text, resume, high)
            if match is None:
                break


def _shortest(pattern: re.Pattern[str]) -> int:
    """The fewest characters a match of ``pattern`` takes (0 where that is not known)."""
    return match_widths(pattern)[0]


def native_available() -> bool:
    """Whether Hyperscan is installed (a dependency on Linux x86_64 and aarch64; elsewhere
    the ``fast`` extra) to find anchors natively."""
    return native_scanner() is not None


def windowed_kinds(
    by_kind: Mapping[str, Sequence[Detector]], *, native: bool
) -> tuple[WindowedKind, ...]:
    """The kinds' patterns grouped by anchor; ``native``: Hyperscan's anchors where it is
    installed (otherwise the pure-Python ones, which find the same places more slowly)."""
    native = native and native_available()
    return tuple(WindowedKind(kind, ds, native=native) for kind, ds in by_kind.items())


def scan(kinds: Sequence[WindowedKind], text: str) -> tuple[list[Found], list[int] | None]:
    """Every finding of ``kinds`` in ``text`` (long text), in kind order, as ``Found`` tuples
    (the caller merges them and makes ``Detection``s of those left); and where markup may
    start when the anchors were found natively (None: search the text for it)."""
    source = _Text(text)
    found: list[Found] = []
    scanner = native_scanner()
    hits: list[list[int]] = []
    if scanner is not None and any(kind.native for kind in kinds):
        hits = source.native_hits(scanner)
    for kind in kinds:
        for group in kind.groups:
            # Most groups have no hit at all in the short windows markup is removed from.
            if group.slot is None or hits[group.slot]:
                group.find_into(source, found)
    if scanner is None or not hits:
        return found, None
    return found, scanner.markup_candidates(hits)


#: Between the texts ``scan_parts`` joins. No anchor or run takes it in (so every hit and window
#: stays in its text, and patterns are searched only within a text's bounds); every look-behind
#: sees it as a text's start (no class they exclude holds it), and so does ``ipv4_valid``'s
#: look back for a version word (no such word holds it).
_SEPARATOR = "\x00"


def scan_parts(
    kinds: Sequence[WindowedKind],
    texts: Sequence[str],
    changes: Sequence[Sequence[int]] | None = None,
) -> list[list[Found]]:
    """What ``scan`` finds in each of ``texts`` (positions in that text), from one native pass
    over them all joined: the many short windows markup is removed from pay for one pass and
    for each group once. Needs every group's anchor native (``WindowedKind.all_native``).

    ``changes``: for each text, where it differs from the text it was copied from (in order):
    then only what lies near one is searched for (``_near_changes``); the rest, the copied
    text shows as well. In digit-dense text most of a markup window is far from its one
    changed character (a line break between two numbers)."""
    scanner = native_scanner()
    assert scanner is not None and all(kind.all_native for kind in kinds)
    parts: list[Window] = []
    at = 0
    for text in texts:
        parts.append((at, at + len(text)))
        at += len(text) + len(_SEPARATOR)
    joined: list[int] | None = None
    if changes is not None:
        joined = [
            start + place
            for (start, _end), ats in zip(parts, changes, strict=True)
            for place in ats
        ]
    source = ScanText(_SEPARATOR.join(texts))
    hits = source.native_hits(scanner)
    found: list[list[Found]] = [[] for _ in texts]
    for kind in kinds:
        for group in kind.groups:
            assert group.slot is not None
            if hits[group.slot]:
                group.find_in_parts(source, hits[group.slot], parts, found, joined)
    return found

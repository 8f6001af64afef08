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

With Hyperscan installed (``codemode.privacy.native``) every anchor comes from one native pass
instead, number kinds with anchors shaped like their pattern (no six-digit clusters), and the
places where markup may be come from the same pass.
"""

from __future__ import annotations

import codecs
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from codemode.privacy.detection import Detection, Detector
from codemode.privacy.native import ANCHORS, NativeAnchor, NativeScanner, native_scanner

__all__ = ["FAST_MIN_CHARS", "WindowedKind", "native_available", "windowed_kinds"]

#: Below this length the whole-text scan is as fast (and its results are cached).
FAST_MIN_CHARS = 2048
_EDGE = 8  # a match ending this close to a window's far edge was cut by it


# Characters that case-insensitive patterns match as ASCII letters (``re`` folds them so).
_FOLDS = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}


def _ascii_of(ch: str) -> str:
    if ch.isdecimal():
        return "0"
    if ch.isspace():
        return " "
    return _FOLDS.get(ch, "?")


def _same_width(error: UnicodeError) -> tuple[str, int]:
    """Encode error handler: one ASCII character per character: ``0`` for any digit, a space
    for any whitespace, the letter ``(?i)`` matches for the few letters it folds to ASCII."""
    assert isinstance(error, UnicodeEncodeError)
    chunk = error.object[error.start : error.end]
    return "".join(map(_ascii_of, chunk)), error.end


codecs.register_error("codemode-same-width", _same_width)

_DIGITS = bytes(48 if 48 <= i <= 57 else 46 for i in range(256))  # digit -> "0", else "."
_DIGITS_DOTS = bytes(48 if 48 <= i <= 57 else (46 if i == 46 else 32) for i in range(256))
_CLUSTER = re.compile(rb"0(?:[^0]{0,3}0){5,}")
_IPV4 = re.compile(rb"0\.0{1,3}\.0")
_IPV6 = re.compile(r":[0-9A-Fa-f]{0,4}:")


@dataclass
class _Text:
    """``text`` and the byte copies the anchors search, made once and only when needed."""

    text: str
    _raw: bytes | None = None
    _lower: bytes | None = None
    _digits: bytes | None = None
    clusters: list[tuple[int, int, int]] | None = None
    _native: list[list[int]] | None = None
    _reversed: bytes | None = None

    @property
    def raw(self) -> bytes:
        if self._raw is None:
            self._raw = self.text.encode("ascii", "codemode-same-width")
        return self._raw

    @property
    def lower(self) -> bytes:
        if self._lower is None:
            self._lower = self.raw.lower()
        return self._lower

    @property
    def digits(self) -> bytes:
        if self._digits is None:
            self._digits = self.raw.translate(_DIGITS)
        return self._digits

    @property
    def reversed(self) -> bytes:
        """``raw`` back to front: a run of characters that ends at a place is matched forward
        from it (searching back for where it starts costs a try at every position)."""
        if self._reversed is None:
            self._reversed = self.raw[::-1]
        return self._reversed

    def native_hits(self, scanner: NativeScanner) -> list[list[int]]:
        if self._native is None:
            self._native = scanner.hits(self.raw)
        return self._native


Window = tuple[int, int]
Anchor = Callable[[_Text], Iterable[Window]]


def _literals(*words: str, back: int, forward: int, lower: bool = False) -> Anchor:
    encoded = [word.encode() for word in words]

    def windows(source: _Text) -> Iterator[Window]:
        if lower:
            haystack: bytes | str = source.lower
            needles: Sequence[bytes | str] = encoded
        else:
            haystack, needles = source.text, words
        for needle in needles:
            at = haystack.find(needle)  # type: ignore[arg-type]
            while at >= 0:
                yield at - back, at + len(needle) + forward
                at = haystack.find(needle, at + 1)  # type: ignore[arg-type]

    return windows


def _regex_windows(pattern: re.Pattern[str], back: int, forward: int) -> Anchor:
    def windows(source: _Text) -> Iterator[Window]:
        for match in pattern.finditer(source.text):
            yield match.start() - back, match.end() + forward

    return windows


_HEX_RUN_BACK = re.compile(r"[0-9A-Fa-f:.]+\Z")
_HEX_RUN = re.compile(r"[0-9A-Fa-f:.]*")


def _ipv6_windows(source: _Text) -> Iterator[Window]:
    """Around each ``:h:`` or ``::``, the run of hex digits, colons and dots it is part of."""
    text = source.text
    for match in _IPV6.finditer(text):
        back = _HEX_RUN_BACK.search(text, max(0, match.start() - 48), match.start() + 1)
        start = back.start() if back is not None else match.start()
        forth = _HEX_RUN.match(text, match.end(), match.end() + 48)
        end = forth.end() if forth is not None else match.end()
        yield start - 1, end + 1


def _ipv4_windows(source: _Text) -> Iterator[Window]:
    if "." not in source.text:
        return
    dots = source.raw.translate(_DIGITS_DOTS)
    for match in _IPV4.finditer(dots):
        yield match.start() - 4, match.end() + 12


def _clusters(source: _Text) -> list[tuple[int, int, int]]:
    """Runs of six or more digits with gaps of at most three: (start, end, digits)."""
    if source.clusters is None:
        digits = source.digits
        source.clusters = [
            (m.start(), m.end(), digits.count(b"0", m.start(), m.end()))
            for m in _CLUSTER.finditer(digits)
        ]
    return source.clusters


def _numbers(
    minimum: int,
    *,
    shape: re.Pattern[str] | None = None,
    before: int = 0,
    after: int = 0,
    reach: int = 2,
) -> Anchor:
    """Clusters with at least ``minimum`` digits; with ``shape``, only those where it shows
    between ``before`` characters before the cluster and ``after`` after it (the letters of
    UK_NINO, ES_DNI and IBAN; inside the cluster too, which can join a value to a number)."""

    def windows(source: _Text) -> Iterator[Window]:
        text = source.text
        for start, end, count in _clusters(source):
            if count < minimum:
                continue
            if shape is None or shape.search(text, max(0, start - before), end + after):
                yield start - reach, end + reach

    return windows


RunWindow = Callable[[_Text, int], Window]


def _run_window(
    before: re.Pattern[bytes] | None, after: re.Pattern[str], back: int, forward: int, size: int
) -> RunWindow:
    """The window over the run of ``before`` characters ending at a needle (at most ``back``
    long, matched in the reversed ASCII copy) and the run of ``after`` characters following it
    (at most ``forward``)."""

    def window(source: _Text, at: int) -> Window:
        start = at
        if before is not None:
            backwards = source.reversed
            origin = len(backwards) - at
            run = before.match(backwards, origin, origin + back)
            if run is not None:
                start -= run.end() - origin
        forth = after.match(source.text, at + size, at + size + forward)
        end = forth.end() if forth is not None else at + size
        return start - 1, end + 1

    return window


def _runs(needle: str, window: RunWindow) -> Anchor:
    """``window`` around each ``needle``."""

    def windows(source: _Text) -> list[Window]:
        text = source.text
        found: list[Window] = []
        at = text.find(needle)
        while at >= 0:
            found.append(window(source, at))
            at = text.find(needle, at + 1)
        return found

    return windows


# An address's local part and domain around its @ (the pattern's own limits, 64 and 253). In
# the ASCII copy a letter beyond ASCII ends the run early: no address can start before it.
_AT_RUN = _run_window(re.compile(rb"[\w.+%\-]*"), re.compile(r"[A-Za-z0-9.\-]*"), 72, 264, 1)
_AT = _runs("@", _AT_RUN)
# An international number: the digits, separators and parentheses after its +.
_PLUS_RUN = _run_window(None, re.compile(r"[\d .()\-]*"), 0, 112, 1)
_PLUS = _runs("+", _PLUS_RUN)
_NATIVE_RUNS: dict[tuple[str, int], RunWindow] = {("EMAIL", 0): _AT_RUN, ("PHONE", 0): _PLUS_RUN}
_NUMBER_ANCHORS: dict[str, Anchor] = {
    "CARD": _numbers(13),
    "SSN": _numbers(9),
    "DE_TAX_ID": _numbers(11),
    "PHONE": _numbers(9),
    # The letters of these kinds lie outside the digits: their windows reach further.
    "UK_NINO": _numbers(6, shape=re.compile(r"[A-Z]{2} ?\d\d"), before=4, reach=24),
    "ES_DNI": _numbers(7, shape=re.compile(r"\d-?[A-Z]|[XYZ]\d"), before=2, after=2, reach=24),
    "IBAN": _numbers(6, shape=re.compile(r"[A-Z]{2}\d\d"), before=12, reach=30),
}


def _native_anchor(scanner: NativeScanner, slot: int, anchor: NativeAnchor) -> Anchor:
    back, forward = anchor.back, anchor.forward

    def windows(source: _Text) -> list[Window]:
        return [(end - back, end + forward) for end in source.native_hits(scanner)[slot]]

    return windows


def _native_runs(scanner: NativeScanner, slot: int, offset: int, window: RunWindow) -> Anchor:
    def windows(source: _Text) -> list[Window]:
        return [window(source, end - offset) for end in source.native_hits(scanner)[slot]]

    return windows


@functools.cache
def _native_anchor_of(kind: str, index: int) -> tuple[Anchor, int] | None:
    """The Hyperscan anchor of a built-in pattern (``codemode.privacy.native``) and the slot
    of its hits, if it has one."""
    scanner = native_scanner()
    slot = scanner.slot(kind, index) if scanner is not None else None
    if scanner is None or slot is None:
        return None
    anchor = ANCHORS[kind, index]
    if anchor.at is not None:
        return _native_runs(scanner, slot, anchor.at, _NATIVE_RUNS[kind, index]), slot
    return _native_anchor(scanner, slot, anchor), slot


def _anchor_of(kind: str, index: int, native: bool = False) -> tuple[Anchor | None, int | None]:
    """The anchor of the ``index``-th built-in pattern of ``kind`` (None: the whole text);
    with ``native``, Hyperscan's where it has one, with the slot of its hits."""
    if native:
        found = _native_anchor_of(kind, index)
        if found is not None:
            return found
    return _python_anchor_of(kind, index), None


def _python_anchor_of(kind: str, index: int) -> Anchor | None:
    if kind == "EMAIL":
        return _AT
    if kind == "SECRET":
        return _SECRET_ANCHORS[index] if index < len(_SECRET_ANCHORS) else None
    if kind == "IP":
        return _ipv4_windows if index == 0 else _ipv6_windows
    if kind == "PHONE" and index == 0:
        return _PLUS
    return _NUMBER_ANCHORS.get(kind)


_SECRET_ANCHORS: tuple[Anchor, ...] = (
    _literals("-----BEGIN ", back=1, forward=16_100),
    _regex_windows(re.compile(r"k_(?:live|test)_"), 2, 248),
    _literals("sk-", back=1, forward=210),
    _regex_windows(re.compile(r"gh[pousr]_"), 1, 252),
    _literals("github_pat_", back=1, forward=250),
    _regex_windows(re.compile(r"xox[abprs]-"), 1, 252),
    _regex_windows(re.compile(r"A(?:KIA|SIA)"), 1, 20),
    _literals("AIza", back=1, forward=40),
    _literals("eyJ", back=1, forward=16_384),
    _literals(
        "key", "secret", "token", "pass", "pwd", "auth", "bearer", back=16, forward=540, lower=True
    ),
)


def _merged(windows: Iterable[Window], size: int) -> list[Window]:
    """``windows`` in order, overlapping ones joined, each reaching ``_EDGE`` further (room for
    the cut-off check) and clipped to the text."""
    spans = sorted(windows)  # anchors mostly find them in order: little left to sort
    if not spans:
        return spans
    merged: list[Window] = []
    low, high = spans[0]
    low, high = max(0, low), high + _EDGE
    for start, end in spans:
        if start <= high:
            high = max(high, end + _EDGE)
        else:
            merged.append((low, min(size, high)))
            low, high = start, end + _EDGE
    merged.append((low, min(size, high)))
    return merged


class _Group:
    """The patterns of one kind that share an anchor, joined as in ``detectors._Scanner``."""

    def __init__(
        self, anchor: Anchor | None, detectors: Sequence[Detector], slot: int | None = None
    ) -> None:
        self.anchor = anchor
        self.slot = slot  # of the anchor's native hits: no hits, nothing to verify
        joinable = [d for d in detectors if not d.pattern.groupindex]
        self.joined = tuple(joinable) if len(joinable) > 1 else ()
        self.separate = tuple(d for d in detectors if d not in self.joined)
        branches = "|".join(f"(?P<_{i}>{d.pattern.pattern})" for i, d in enumerate(self.joined))
        self.combined = re.compile(branches) if self.joined else None

    def find_into(self, source: _Text, found: list[Detection]) -> None:
        text = source.text
        if self.anchor is None:
            windows = [(0, len(text))]
        else:
            windows = _merged(self.anchor(source), len(text))
            if not windows:
                return
        if self.combined is not None:
            for low, high in windows:
                self._joined(text, low, high, found)
        for detector in self.separate:
            _find(detector, text, windows, found)

    def _joined(self, text: str, low: int, high: int, found: list[Detection]) -> None:
        assert self.combined is not None
        limit = high - _EDGE if high < len(text) else high
        mark = len(found)
        for match in self.combined.finditer(text, low, high):
            detector = self.joined[int(match.lastgroup[1:])] if match.lastgroup else None
            if detector is None or (detector.validate is not None and not detector.validate(match)):
                del found[mark:]
                for one in self.joined:
                    _find(one, text, [(low, high)], found)
                return
            if match.end() <= limit:
                found.append(Detection(detector.kind, match.start(), match.end(), match.group()))


class WindowedKind:
    """One kind's built-in patterns, each group run in the windows around its anchor."""

    def __init__(self, kind: str, detectors: Sequence[Detector], *, native: bool) -> None:
        self.kind = kind
        by_anchor: dict[tuple[Anchor | None, int | None], list[Detector]] = {}
        for index, detector in enumerate(detectors):
            by_anchor.setdefault(_anchor_of(kind, index, native), []).append(detector)
        self.groups = tuple(_Group(key[0], members, key[1]) for key, members in by_anchor.items())
        self.native = any(group.slot is not None for group in self.groups)


def _find(detector: Detector, text: str, windows: Sequence[Window], found: list[Detection]) -> None:
    """``detector``'s matches in each window, but those cut by its far edge (``_EDGE``)."""
    search, validate, kind = detector.pattern.search, detector.validate, detector.kind
    has_group = "value" in detector.pattern.groupindex
    size = len(text)
    for low, high in windows:
        # Most windows hold one match or none: ``search`` costs less than ``finditer`` there.
        match = search(text, low, high)
        if match is None:
            continue
        limit = high - _EDGE if high < size else high
        while match is not None:
            end = match.end()
            if end <= limit and (validate is None or validate(match)):
                start, stop = match.span("value") if has_group else (match.start(), end)
                if stop > start:
                    found.append(Detection(kind, start, stop, text[start:stop]))
            match = search(text, end, high)


def native_available() -> bool:
    """Whether Hyperscan is installed (the ``fast`` extra) to find anchors natively."""
    return native_scanner() is not None


def windowed_kinds(
    by_kind: Mapping[str, Sequence[Detector]], *, native: bool
) -> tuple[WindowedKind, ...]:
    """The kinds' patterns grouped by anchor; ``native``: Hyperscan's anchors where it is
    installed (otherwise the pure-Python ones, which find the same places more slowly)."""
    native = native and native_available()
    return tuple(WindowedKind(kind, ds, native=native) for kind, ds in by_kind.items())


def scan(kinds: Sequence[WindowedKind], text: str) -> tuple[list[Detection], list[int] | None]:
    """Every detection of ``kinds`` in ``text`` (long text), in kind order; and where markup
    may start when the anchors were found natively (None: search the text for it)."""
    source = _Text(text)
    found: list[Detection] = []
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

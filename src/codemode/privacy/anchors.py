"""The pure-Python anchors of the fast path: the windows around cheap needles that every
match of a built-in pattern contains (``fastscan`` explains them; ``native`` finds the same
places with Hyperscan, where it is installed)."""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Iterator, Sequence

from codemode.privacy.scantext import ScanText, Window

__all__ = ["NATIVE_RUNS", "Anchor", "RunWindow", "python_anchor_of"]

_DIGITS_DOTS = bytes(48 if 48 <= i <= 57 else (46 if i == 46 else 32) for i in range(256))
_CLUSTER = re.compile(rb"0(?:[^0]{0,3}0){5,}")
_IPV4 = re.compile(rb"0\.0{1,3}\.0")
_IPV6 = re.compile(r":[0-9A-Fa-f]{0,4}:")

Anchor = Callable[[ScanText], Iterable[Window]]


def _literals(*words: str, back: int, forward: int, lower: bool = False) -> Anchor:
    encoded = [word.encode() for word in words]

    def windows(source: ScanText) -> Iterator[Window]:
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
    def windows(source: ScanText) -> Iterator[Window]:
        for match in pattern.finditer(source.text):
            yield match.start() - back, match.end() + forward

    return windows


_HEX_RUN_BACK = re.compile(r"[0-9A-Fa-f:.]+\Z")
_HEX_RUN = re.compile(r"[0-9A-Fa-f:.]*")


def _ipv6_windows(source: ScanText) -> Iterator[Window]:
    """Around each ``:h:`` or ``::``, the run of hex digits, colons and dots it is part of."""
    text = source.text
    for match in _IPV6.finditer(text):
        back = _HEX_RUN_BACK.search(text, max(0, match.start() - 48), match.start() + 1)
        start = back.start() if back is not None else match.start()
        forth = _HEX_RUN.match(text, match.end(), match.end() + 48)
        end = forth.end() if forth is not None else match.end()
        yield start - 1, end + 1


def _ipv4_windows(source: ScanText) -> Iterator[Window]:
    if "." not in source.text:
        return
    dots = source.raw.translate(_DIGITS_DOTS)
    for match in _IPV4.finditer(dots):
        yield match.start() - 4, match.end() + 12


def _clusters(source: ScanText) -> list[tuple[int, int, int]]:
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

    def windows(source: ScanText) -> Iterator[Window]:
        text = source.text
        for start, end, count in _clusters(source):
            if count < minimum:
                continue
            if shape is None or shape.search(text, max(0, start - before), end + after):
                yield start - reach, end + reach

    return windows


#: The windows around needles at the given places (in order), one for each.
RunWindow = Callable[[ScanText, Iterable[int]], list[Window]]


def _run_window(
    before: bytes | None, after: re.Pattern[str], back: int, forward: int, size: int
) -> RunWindow:
    """The window over the run of ``before`` characters (ASCII) ending at each needle (at most
    ``back`` long, in the ASCII copy: what ``rstrip`` takes off the bytes before the needle;
    a regex searching back for where it starts would try every position) and the run of
    ``after`` characters following it (at most ``forward``)."""

    def windows(source: ScanText, places: Iterable[int]) -> list[Window]:
        text = source.text
        raw = source.raw if before is not None else b""
        found: list[Window] = []
        for at in places:
            start = at
            if before is not None:
                piece = raw[max(0, at - back) : at]
                start -= len(piece) - len(piece.rstrip(before))
            forth = after.match(text, at + size, at + size + forward)
            end = forth.end() if forth is not None else at + size
            found.append((start - 1, end + 1))
        return found

    return windows


def _runs(needle: str, window: RunWindow) -> Anchor:
    """``window`` around each ``needle``."""

    def windows(source: ScanText) -> list[Window]:
        text = source.text
        places: list[int] = []
        at = text.find(needle)
        while at >= 0:
            places.append(at)
            at = text.find(needle, at + 1)
        return window(source, places)

    return windows


# What ``rb"[\w.+%\-]"`` matches: the characters of an address before its @.
_ADDRESS_BYTES = (string.ascii_letters + string.digits + "_.+%-").encode()
# An address's local part and domain around its @ (the pattern's own limits, 64 and 253). In
# the ASCII copy a letter beyond ASCII ends the run early: no address can start before it.
_AT_RUN = _run_window(_ADDRESS_BYTES, re.compile(r"[A-Za-z0-9.\-]*"), 72, 264, 1)
_AT = _runs("@", _AT_RUN)
# An international number: the digits, separators and parentheses after its +.
_PLUS_RUN = _run_window(None, re.compile(r"[\d .()\-]*"), 0, 112, 1)
_PLUS = _runs("+", _PLUS_RUN)
NATIVE_RUNS: dict[tuple[str, int], RunWindow] = {("EMAIL", 0): _AT_RUN, ("PHONE", 0): _PLUS_RUN}
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


def python_anchor_of(kind: str, index: int) -> Anchor | None:
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

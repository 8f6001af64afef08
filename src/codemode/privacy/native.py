"""Native anchors for the fast path: one Hyperscan pass finds every place a value may be.

A dependency on Linux x86_64 and aarch64 (elsewhere the ``fast`` extra installs
``hyperscan``); without it ``fastscan`` finds the same places in pure Python, several times
more slowly. Each built-in pattern listed here gets an expression that every match of the
pattern contains (the look-behind becomes the character before the match, look-aheads are
left out, repeats are cut to their minimum), with how far a match may reach ``back`` before
and ``forward`` after the end offset Hyperscan reports. The
expressions run over the text's same-width ASCII copy (``fastscan._Text.raw``: one byte per
character, so offsets are the text's own). ``tests/privacy/test_fastscan.py`` checks, over
generated text, that the fast path with these anchors hides everything the whole-text scan
hides.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass

try:
    import hyperscan as _hs
except ImportError:  # pragma: no cover - the pure-Python anchors serve
    _hs = None  # type: ignore[assignment]

__all__ = ["ANCHORS", "MARKUP", "NativeAnchor", "NativeScanner", "native_scanner"]

_HEX = "[0-9A-Fa-f]{1,4}"


@dataclass(frozen=True, slots=True)
class NativeAnchor:
    """Every match of a built-in pattern lies in ``[end - back, end + forward]`` around an end
    offset ``expression`` reports. With ``at``: the window is the pattern's run of characters
    around the needle that starts ``at`` characters before the end (``fastscan._runs``).

    ``dead``: where every match of the pattern ends as a hit's expression does, or opens
    where a hit's last ``lead`` characters do (an expression of a fixed length), the
    characters (of the ASCII copy) that, ``lead`` before a hit's end, make the pattern's check
    turn its match down. Windows whose every hit has one there find nothing (``fastscan``)."""

    expression: str
    back: int = 0
    forward: int = 0
    at: int | None = None
    lead: int = 0
    dead: bytes = b""


#: (kind, pattern index) -> its anchor. Where the old pure-Python anchor was a literal, the
#: window is the same; number kinds get the shape of their pattern's first characters.
ANCHORS: dict[tuple[str, int], NativeAnchor] = {
    ("SECRET", 0): NativeAnchor(r"-----BEGIN ", 12, 16_100),
    ("SECRET", 1): NativeAnchor(r"k_(?:live|test)_", 9, 248),
    ("SECRET", 2): NativeAnchor(r"sk-", 4, 210),
    ("SECRET", 3): NativeAnchor(r"gh[pousr]_", 5, 252),
    ("SECRET", 4): NativeAnchor(r"github_pat_", 12, 250),
    ("SECRET", 5): NativeAnchor(r"xox[abprs]-", 6, 252),
    ("SECRET", 6): NativeAnchor(r"A(?:KIA|SIA)", 5, 20),
    ("SECRET", 7): NativeAnchor(r"AIza", 5, 40),
    ("SECRET", 8): NativeAnchor(r"eyJ", 4, 16_384),
    ("SECRET", 9): NativeAnchor(r"(?i)key|secret|token|pass|pwd|auth|bearer", 22, 540),
    ("EMAIL", 0): NativeAnchor(r"[A-Za-z0-9._%+\-]@[A-Za-z0-9]", at=2),
    # No character before: the ASCII copy shows a non-ASCII digit as 0, which the pattern's
    # look-behind (ASCII letters and digits) lets through.
    ("IBAN", 0): NativeAnchor(r"[A-Z]{2}\d\d ?[A-Z0-9]{4} ?[A-Z0-9]{4}", 16, 34),
    # ``card_valid`` turns down a number that opens with 1, 7, 8 or 9 (no issuer's numbers do;
    # in the ASCII copy those are ASCII digits: any other digit is 0 there). Most runs of
    # four-digit numbers in text are years.
    ("CARD", 0): NativeAnchor(
        r"(?:^|[^\w.\-])\d{4}[ \-]\d{4}[ \-]\d{4}[ \-]\d", 17, 9, lead=16, dead=b"1789"
    ),
    ("CARD", 1): NativeAnchor(
        r"(?:^|[^\w.\-])\d{4}[ \-]\d{6}[ \-]\d{4}", 17, 3, lead=16, dead=b"1789"
    ),
    ("CARD", 2): NativeAnchor(r"(?:^|[^\w.\-])\d{13}", 14, 8, lead=13, dead=b"1789"),
    ("SSN", 0): NativeAnchor(r"(?:^|[^\w.\-])\d{3}[ \-]\d{2}[ \-]\d{4}", 12, 2),
    ("UK_NINO", 0): NativeAnchor(r"[A-Z]{2} ?\d\d ?\d\d ?\d\d ?[A-D]", 14, 2),
    ("DE_TAX_ID", 0): NativeAnchor(r"(?:^|[^\w.,\-])[1-9]\d ?\d{3} ?\d{3} ?\d{3}", 15, 2),
    ("ES_DNI", 0): NativeAnchor(r"(?:^|[^\w\-])(?:\d{8}|[XYZ]\d{7})-?[A-Z]", 11, 2),
    # The last digit of the first group to the first of the last: one hit per address.
    ("IP", 0): NativeAnchor(r"\d\.\d{1,3}\.\d{1,3}\.\d", 14, 4),
    # IPv6 that ``ipv6_valid`` accepts has "::" or at least six groups (the IPv4-tailed form);
    # a match is at most 50 characters long.
    ("IP", 1): NativeAnchor(rf"::|(?:{_HEX}:){{6}}", 52, 52),
    ("PHONE", 0): NativeAnchor(r"(?:^|[^\w+])\+\d", at=2),
    # The area code opens the number or follows its "1": not the tail of a longer number.
    # A match ends with the hit; ``nanp_valid`` turns down an exchange (8 before the end)
    # that opens with 1 (or 0, which in the ASCII copy may be another digit).
    ("PHONE", 1): NativeAnchor(
        r"(?:^|[^\w.\-+(/]|1[ .\-])(?:\(\d{3}\) ?|\d{3}[ .\-])\d{3}[ .\-]\d{4}",
        18,
        2,
        lead=8,
        dead=b"1",
    ),
    # A trunk number's first group and two digits of the next; the rest follows (50 at most).
    ("PHONE", 2): NativeAnchor(r"(?:^|[^\w.\-+/])0\d{1,4}[ \-/]\d\d", 10, 48),
    ("PHONE", 3): NativeAnchor(r"\(0[1-9]", 3, 52),
}

# A digit, or a character beyond ASCII (which may be one); whitespace other than a space.
_DIGITISH = [*"0123456789", r"\?"]
_BREAKS = [r"\t", r"\n", r"\r", r"\x0b", r"\x0c"]
# What may follow a line break that ends whitespace between two digits: a digit, more
# whitespace (``str.isspace`` in ASCII), or a character beyond ASCII (either).
_AFTER_BREAK = [*_DIGITISH, *_BREAKS, r"\x1c", r"\x1d", r"\x1e", r"\x1f", " "]
# The highlight tags ``markup`` takes out (``markup._HIGHLIGHT_TAG``), opening and closing:
# "<", the name in either case, then whitespace or ">" (the ASCII copy shows the letters
# beyond ASCII that ``re.IGNORECASE`` folds to a name's (dotless i, long s, the Kelvin sign) as
# those, and any whitespace as a space: ``scantext``).
_TAG_NAMES = ("em", "b", "strong", "mark", "i", "u", "span", "hl")
_TAG_END = r"[\t\n\r\x0b\x0c\x1c-\x1f >]"


def _tags() -> list[tuple[str, int]]:
    """The tags' expressions, one of each length (a candidate is ``length`` before the end)."""
    by_length: dict[int, list[str]] = {}
    for name in _TAG_NAMES:
        letters = "".join(f"[{letter}{letter.upper()}]" for letter in name)
        for opening in ("<", "</"):
            by_length.setdefault(len(opening) + len(name) + 1, []).append(
                opening + letters + _TAG_END
            )
    return [("|".join(expressions), length) for length, expressions in sorted(by_length.items())]


#: Where markup may be (``markup._markup_positions`` checks each): its ASCII needles (a "<"
#: only where a highlight tag opens: not the "<" of "Ada <ada@example.com>"), a line break
#: between a digit (or any non-ASCII character, which may be one) and what may go on to one,
#: and a double space after a digit. The last two are written out as literals: Hyperscan's
#: literal matcher finds them, and the whole pass over dense text takes a third less time.
MARKUP: tuple[tuple[str, int], ...] = (
    (r"\[|\]", 1),
    (r"\*\*|__| @|@ ", 2),
    (r"\.\.\.", 3),
    (
        "|".join(
            digit + space + after
            for digit in _DIGITISH
            for space in _BREAKS
            for after in _AFTER_BREAK
        ),
        2,
    ),
    ("|".join(digit + "  " for digit in _DIGITISH), 2),
    *_tags(),
)


class NativeScanner:
    """The compiled anchors; ``hits`` scans a text's ASCII copy once for all of them."""

    def __init__(self) -> None:
        if _hs is None:
            raise RuntimeError("hyperscan is not installed: pip install hyperscan")
        self.keys = tuple(ANCHORS)
        expressions = [ANCHORS[key].expression for key in self.keys]
        expressions += [expression for expression, _length in MARKUP]
        self.markup_slots = range(len(self.keys), len(expressions))
        self._hs = _hs
        self._db = _hs.Database()
        self._db.compile(
            expressions=[expression.encode() for expression in expressions],
            ids=list(range(len(expressions))),
            elements=len(expressions),
        )
        self._size = len(expressions)
        # Hyperscan lets go of the GIL while it scans: one scratch space per thread.
        self._local = threading.local()

    def slot(self, kind: str, index: int) -> int | None:
        key = (kind, index)
        return self.keys.index(key) if key in ANCHORS else None

    def hits(self, raw: bytes) -> list[list[int]]:
        """End offsets each expression reports in ``raw``, by slot (the anchors, then
        ``MARKUP``), in ascending order."""
        found: list[list[int]] = [[] for _ in range(self._size)]
        appends: list[Callable[[int], None]] = [ends.append for ends in found]

        def on_match(slot: int, _start: int, end: int, _flags: int, _context: object) -> None:
            appends[slot](end)

        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._hs.Scratch(self._db)
        self._db.scan(raw, match_event_handler=on_match, scratch=scratch)
        return found

    def markup_candidates(self, hits: list[list[int]]) -> list[int]:
        """Where markup may start, from ``hits`` (to check against the text)."""
        return [
            end - length
            for slot, (_expression, length) in zip(self.markup_slots, MARKUP, strict=True)
            for end in hits[slot]
        ]


@functools.cache
def native_scanner() -> NativeScanner | None:
    """The process's scanner (compiled once, about 0.1 s), or None without ``hyperscan``."""
    return NativeScanner() if _hs is not None else None

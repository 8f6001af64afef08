"""Find values that markup has split or wrapped: search snippets, highlighted text, Markdown.

Full-text search tools return snippets such as ``maria.lopez@[globex].example.com``,
``+44 20 [7946] 0958``, ``<em>maria</em>.lopez@...``, ``**+44** 20 7946 0958`` or
``...maria.lopez@globex.example.com...``. The detectors, which look for values as they are
written, miss them. ``markup_detections`` removes the markup around each place it occurs (a copy
of a window of text, with a map back to the original positions), runs the detectors on that
copy, and reports each value found with the span it covers in the original text, markup
included. Replacing that span hides the value and its markup together.

What counts as markup: HTML-ish highlight tags (``em``, ``b``, ``strong``, ``mark``, ``i``,
``u``, ``span``, ``hl``), square brackets, ``**`` and ``__``, ``...`` and ``…`` (as a space),
whitespace around ``@``, and any run of whitespace between two digits (as one space).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence

from codemode.privacy.detection import Detection, Found

__all__ = [
    "CHANGE_AFTER",
    "CHANGE_REACH",
    "has_markup",
    "markup_detections",
    "near_change",
    "normalize",
]

# What ``\s`` matches (``str.isspace``).
_WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# Highlight tags, bold, brackets; ellipses (a space); whitespace around @; other whitespace
# between two digits (a space): ``(?<=\d)(\s{2,}|[^\S ])(?=\d)``. Every branch opens with
# its own first character (the look-behinds come after it) so that ``re`` skips ahead to the
# next such character instead of trying every branch at every position; a branch that ends
# in an empty group stands for a space.
_HIGHLIGHT_TAG = r"</?(?:em|b|strong|mark|i|u|span|hl)(?:\s[^<>]{0,60})?>"
_MARKUP = re.compile(
    "|".join(
        [
            _HIGHLIGHT_TAG,
            r"\*\*",
            r"__",
            r"\[",
            r"\]",
            r"\.\.\.()",
            r"…()",
            r" (?<=[\w.] )[ \t]*(?=@)",
            r" (?<=@ )[ \t]*(?=\w)",
            r" (?<=\d )\s+(?=\d)()",
            r"\t(?<=[\w.]\t)[ \t]*(?=@)",
            r"\t(?<=@\t)[ \t]*(?=\w)",
            *(
                rf"{re.escape(ch)}(?<=\d{re.escape(ch)})\s*(?=\d)()"
                for ch in _WHITESPACE
                if ch != " "
            ),
        ]
    ),
    re.IGNORECASE,
)
_SPACES = re.compile(r"\s+")
_TAG = re.compile(_HIGHLIGHT_TAG, re.IGNORECASE)
_HINTS = ("[", "]", "**", "__", "<", "...", "…", " @", "@ ", "\n", "\t", "  ")
#: Text around each piece of markup that is searched again (a value is at most this long).
_WINDOW = 160
#: How far before a value a changed character may change whether it is found (the detectors'
#: look-behinds read a character or two, ``checks.ipv4_valid`` 16 for a version word), and
#: after it (the look-aheads read one or two).
CHANGE_REACH = 32
CHANGE_AFTER = 8


def near_change(changes: Sequence[int], start: int, end: int) -> bool:
    """Whether a change (``changes``, in order) lies in ``start:end`` or within reach of it:
    else what is found there is found in the text as written too, and decided there."""
    at = bisect.bisect_left(changes, start - CHANGE_REACH)
    return at < len(changes) and changes[at] <= end + CHANGE_AFTER


_HINT = re.compile("|".join(re.escape(hint) for hint in _HINTS))
# Up to this length one search for any hint costs less than a search for each (a field of a
# record: 0.2-0.4 us against 0.7-0.9); in long text each ``in`` is the faster scan.
_ONE_SEARCH_MAX = 256


def has_markup(text: str) -> bool:
    """Cheap test: could ``text`` hold markup at all?"""
    if len(text) <= _ONE_SEARCH_MAX:
        return _HINT.search(text) is not None
    return any(hint in text for hint in _HINTS)


class _Map:
    """Positions in a normalized copy back to the original text."""

    def __init__(self) -> None:
        self.norm_starts: list[int] = []
        self.pieces: list[tuple[int, int, int, bool]] = []  # norm start, orig start, end, kept
        #: While the copy only replaces characters one for one (a newline between two digits
        #: by a space: most markup in dense text), what each position adds to be one in the
        #: original (``start`` and ``end`` of a position from 1 on); otherwise None.
        self.offset: int | None = None
        self._one_for_one = True
        #: Where the copy differs from the original, in order: the position of each space that
        #: replaced markup, and of each place markup was taken out from between two positions.
        self.changes: list[int] = []

    def add(self, norm_start: int, orig_start: int, orig_end: int, kept: bool) -> None:
        if self._one_for_one:
            if not self.pieces:
                self.offset = orig_start - norm_start
            if orig_start - norm_start != self.offset or (not kept and orig_end - orig_start > 1):
                self._one_for_one, self.offset = False, None
        self.norm_starts.append(norm_start)
        self.pieces.append((norm_start, orig_start, orig_end, kept))

    def start(self, position: int) -> int:
        norm_start, orig_start, _end, kept = self.pieces[self._piece(position)]
        return orig_start + (position - norm_start) if kept else orig_start

    def end(self, position: int) -> int:
        """The original end (exclusive) of the character before normalized ``position``."""
        norm_start, orig_start, orig_end, kept = self.pieces[self._piece(position - 1)]
        return orig_start + (position - norm_start) if kept else orig_end

    def _piece(self, position: int) -> int:
        return max(0, bisect.bisect_right(self.norm_starts, position) - 1)


# Where a match of ``_MARKUP`` may start (``_match_starts``): these characters, and the pairs.
_STARTS = re.compile(
    "[<\\[\\]\u2026@" + "".join(re.escape(ch) for ch in _WHITESPACE if ch != " ") + "]"
)
_PAIRS = ("...", "**", "__", "  ")
# The first character of each branch of ``_MARKUP`` (none is a letter ``re.IGNORECASE`` folds).
_OPENERS = frozenset("<*_[].\u2026" + _WHITESPACE)


def _match_starts(text: str, start: int, end: int, pairs: Sequence[int] | None = None) -> list[int]:
    """Every place in ``text[start:end]`` a match of ``_MARKUP`` may start (and more), in
    order: its search tries each branch at each space of prose, which costs more than all the
    detectors on a window. A space opens a match only next to ``@`` (after it, or before it
    with spaces and tabs between), before other whitespace, or at ``start`` (whose look-behind
    sees the text before it). Places whose character opens no branch are left out: trying
    the pattern there costs a try of every branch. ``pairs``: places in all of ``text``, in
    order, among them every ``...``, ``**`` and ``__`` and every double space after a digit
    (no other opens a match), found already (``native.MARKUP``); without them the window is
    searched for them."""
    chunk = text[start:end]  # positions in it count from ``start``
    places = [0]
    for found in _STARTS.finditer(chunk):
        at = found.start()
        if chunk[at] == "@":
            places.append(at + 1)
            run = at
            while run > 0 and chunk[run - 1] in " \t":
                run -= 1
            places.append(run)
        else:
            places.append(at)
            places.append(at - 1)  # after whitespace: the space before it may open a match
    if pairs is None:
        for pair in _PAIRS:
            if pair in chunk:  # mostly not: ``in`` costs less than a call of ``find``
                at = chunk.find(pair)
                while at >= 0:
                    places.append(at)
                    at = chunk.find(pair, at + 1)
    else:
        first = bisect.bisect_left(pairs, start)
        last = bisect.bisect_left(pairs, end, first)
        if last > first:
            places.extend([at - start for at in pairs[first:last]])
    size = len(chunk)
    return sorted({start + at for at in places if 0 <= at < size and chunk[at] in _OPENERS})


def normalize(
    text: str, start: int = 0, end: int | None = None, pairs: Sequence[int] | None = None
) -> tuple[str, _Map]:
    """``text[start:end]`` without markup, and the map back to positions in ``text``
    (``pairs``: see ``_match_starts``)."""
    end = len(text) if end is None else end
    out: list[str] = []
    mapping = _Map()
    size = 0
    position = start
    for at in _match_starts(text, start, end, pairs):
        match = _MARKUP.match(text, at, end) if at >= position else None
        if match is None:
            continue
        if match.start() > position:
            out.append(text[position : match.start()])
            mapping.add(size, position, match.start(), kept=True)
            size += match.start() - position
        mapping.changes.append(size)
        replacement = " " if match.lastindex else ""
        if replacement:
            out.append(replacement)
            mapping.add(size, match.start(), match.end(), kept=False)
            size += len(replacement)
        position = match.end()
    if position < end:
        out.append(text[position:end])
        mapping.add(size, position, end, kept=True)
    return "".join(out), mapping


_NEEDLES = ("[", "]", "**", "__", "<", "...", "…", " @", "@ ")
_SPACE_NEEDLES = ("\n", "\t", "\r", "\x0b", "\x0c", "  ", "\u00a0", "\u2009", "\u202f")
_WIDE = ("…", "\u00a0", "\u2009", "\u202f")  # what an ASCII copy of the text cannot tell apart


def _finds(text: str, needles: Sequence[str]) -> list[int]:
    found: list[int] = []
    for needle in needles:
        at = text.find(needle)
        while at >= 0:
            found.append(at)
            at = text.find(needle, at + 1)
    return found


def _markup_positions(text: str, candidates: Sequence[int] | None = None) -> set[int]:
    """Where markup may be: found with ``str.find`` (a regex over all of a long text would
    cost more than the detectors), or checked among ``candidates`` (``native.MARKUP``: every
    place an ASCII needle may start, found natively) plus the needles no ASCII copy shows."""
    places: Sequence[int]
    if candidates is None:
        places = _finds(text, _NEEDLES + _SPACE_NEEDLES)
    else:
        # ``str.isascii`` is a flag of the string, not a pass over it.
        places = [*candidates, *_finds(text, _WIDE)] if not text.isascii() else candidates
    positions: set[int] = set()
    for at in places:
        if text.startswith(_NEEDLES, at):
            # A "<" opens markup only as a highlight tag: not "Ada <ada@example.com>", a
            # comparison or other HTML (a window around each would cost a second pass).
            if text[at] != "<" or _TAG.match(text, at) is not None:
                positions.add(at)
        elif at > 0 and text[at - 1].isdigit() and text.startswith(_SPACE_NEEDLES, at):
            # Whitespace between two digits. Mostly one character: no regex for its run's end
            # (``str.isspace`` is what ``\s`` matches).
            after = at + 1
            if text[after : after + 1].isspace():
                run = _SPACES.match(text, at)
                after = run.end() if run is not None else after
            if text[after : after + 1].isdigit():
                positions.add(at)
    return positions


def markup_detections(
    text: str,
    detect: Callable[[str], Sequence[Detection]],
    candidates: Sequence[int] | None = None,
    *,
    detect_all: Callable[[list[str], list[list[int]]], Sequence[Sequence[Found]]] | None = None,
) -> list[Found]:
    """Values that only show once markup is removed, with their spans in ``text``.

    Each is a ``Found``, ``(kind, start, end, value)``: the value without markup (what the
    vault should hold) and the span in ``text`` it covers, markup included. ``candidates``:
    places markup may start, found natively (each is checked here); without them the text is
    searched.
    ``detect_all``: ``detect`` of each of many windows at once, as ``Found`` tuples (cheaper
    than one by one), told where each window's copy differs from the text (``_Map.changes``):
    it may leave out what is found away from those places, which the text as written shows
    as well (and which would be dropped as found already).
    """
    windows: list[list[int]] = []
    for at in sorted(_markup_positions(text, candidates)):
        low, high = max(0, at - _WINDOW), min(len(text), at + _WINDOW)
        if windows and low <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], high)
        else:
            windows.append([low, high])
    # The native candidates hold every pair that may open markup: four searches of each
    # window for them cost more than looking them up.
    pairs = sorted(candidates) if candidates is not None else None
    cleaned: list[tuple[str, _Map]] = []
    kept: list[list[int]] = []
    for low, high in windows:
        clean, mapping = normalize(text, low, high, pairs)
        # A window whose copy reads as the text does (its markup-like places were none, as
        # the " @ " of "- @ -") holds nothing near a change: nothing to search.
        if mapping.changes:
            cleaned.append((clean, mapping))
            kept.append([low, high])
    windows = kept
    cleans = [clean for clean, _mapping in cleaned]
    detected = (
        detect_all(cleans, [mapping.changes for _clean, mapping in cleaned])
        if detect_all is not None
        else [[(d.kind, d.start, d.end, d.value) for d in detect(clean)] for clean in cleans]
    )
    found: list[Found] = []
    for (low, high), (clean, mapping), items in zip(windows, cleaned, detected, strict=True):
        offset, changes = mapping.offset, mapping.changes
        for kind, start, end, value in items:
            # A value cut by the window's edge is found again from a window around it.
            if (start == 0 and low > 0) or (end == len(clean) and high < len(text)):
                continue
            # Away from the markup the copy reads as the text does, but for the window's
            # edges: there the text as written decides (a window that opens between
            # "build" and "10.1.2.3" would read an address where the text has a version).
            if not near_change(changes, start, end):
                continue
            if offset is not None:  # ``end`` is 1 at least: a value is never empty
                found.append((kind, offset + start, offset + end, value))
            else:
                found.append((kind, mapping.start(start), mapping.end(end), value))
    return found

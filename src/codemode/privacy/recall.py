"""Find values the vault already holds, and fragments of them, in later text.

Hostile code, or an upstream that echoes its input, can bring a hidden value back in another
shape: half of an address in a truncated error message, the address turned into a document id
(``doc-maria-lopez-globex-example-com``), a value rebuilt piece by piece. ``Recall`` compares
text with every value of the vault. A span of text is replaced by a value's token only when it
IS that value, or that value transformed (case, separators, markup, spacing, a slug) or cut
short; text that merely shares words with a value (a person's name and their address, a company
and its domain) is left alone:

exact      a value too short for fragments (4 to 7 letters and digits), as it was seen,
           anywhere in the text;
skeleton   both sides reduced to lower-case letters and digits; a run of at least
           ``fragment_chars(value)`` characters of the value's skeleton (about 40% of it, and 8
           or more) found in the text's skeleton is a candidate, and counts when it is the
           whole value or a cut of it that only the value would show:

           an e-mail address  the run crosses the ``@``, with three characters of the local
                              part and three of the domain (a name followed by a word, or a
                              shared domain, is not the address); or it is the whole local part
                              written as one word (``MARIA_LOPEZ``, not ``Maria Lopez``).
                              ``at`` and ``dot`` written as words count as ``@`` and ``.``;
           a phone number     the run reaches its last three digits (a shared area code is
                              not the number);
           words              a value of several words (a name, a street) is not found in a
                              run made of some of its whole words (``Harbour Road`` of
                              ``12 Harbour Road``): only the whole value or a run cut inside a
                              word counts.

Skeleton matching runs on strings up to ``FRAGMENT_SCAN_MAX`` characters (results are made of
small strings; printed output is capped) through an index of the values' 8-character pieces;
longer strings get exact matching only. Runs of hex or base64 are decoded and looked into
too (``encoded.py``): a value so written is replaced, run and all.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from codemode.heap import paused_for
from codemode.privacy.encoded import encoded_runs
from codemode.privacy.exact import ExactIndex, places_of
from codemode.privacy.skeletons import Offsets, skeleton_of
from codemode.privacy.vault import Vault, VaultEntry

__all__ = [
    "FRAGMENT_SCAN_MAX",
    "KEPT_MIN_CHARS",
    "LONG_TEXT_ALL_VALUES",
    "Recall",
    "RecallHit",
    "fragment_chars",
    "skeleton",
]

FRAGMENT_SCAN_MAX = 65_536
LONG_TEXT_ALL_VALUES = 256
_MIN_EXACT = 4
_MIN_SKELETON = 8
# The text is looked up at every position, 8 characters (the shortest fragment) at a time.
_GRAM = 8
_STRIDE = 1
# Texts from this long on have their places kept (``Recall.find`` with a digest), the few a
# call reads: an echoed argument's reading answers the result's.
KEPT_MIN_CHARS = 4096
_KEPT_TEXTS = 4
# A gram's place in a value: the value's index, then the offset (values are shorter than 4 GB).
_OFFSET_BITS = 32
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1
# A gram shared by up to this many values keeps their places in a tuple (copied to add one).
_SHARED_AS_TUPLE = 16


def skeleton(text: str) -> str:
    """Lower-case ASCII letters and digits of ``text``, in order."""
    return skeleton_of(text.lower())


def fragment_chars(skeleton_length: int) -> int:
    """How much of a value's skeleton must show for a fragment to count."""
    return max(_MIN_SKELETON, math.ceil(skeleton_length * 0.4))


@dataclass(frozen=True, slots=True)
class RecallHit:
    """``text[start:end]`` holds ``entry``'s value (``whole``) or a fragment of it."""

    start: int
    end: int
    entry: VaultEntry
    whole: bool = False


_new = object.__new__
_SET_START, _SET_END, _SET_ENTRY, _SET_WHOLE = (
    RecallHit.__dict__[name].__set__ for name in ("start", "end", "entry", "whole")
)


def _exact_hit(start: int, end: int, entry: VaultEntry) -> RecallHit:
    """``RecallHit(start, end, entry)`` in half the time (the frozen class's ``__init__``
    sets each slot through ``object.__setattr__``): a value in a MB can be in thousands."""
    hit = _new(RecallHit)
    _SET_START(hit, start)
    _SET_END(hit, end)
    _SET_ENTRY(hit, entry)
    _SET_WHOLE(hit, False)
    return hit


class _Known(NamedTuple):
    """A value as the recall compares it (a tuple: a result of records indexes thousands)."""

    entry: VaultEntry
    exact: str
    skeleton: str
    minimum: int  # fragment length
    first_end: int  # a fragment must start before this offset of the skeleton
    last_start: int = 0  # ... and end after this one
    local: int = 0  # an e-mail address: the length of its local part's skeleton
    words: tuple[tuple[int, int], ...] = ()  # a value of several words: its words of letters


class Recall:
    """The vault's values as a searchable index.

    ``refresh`` takes in the values added since the last call (the tokenizer calls it once
    per result or text, so values issued while one result is walked are recalled from the
    next one on).
    """

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self._version = -1
        self._known: list[_Known] = []
        self._short: list[_Known] = []  # values too short for fragments: exact matches only
        # 8 chars -> where they start in values (known index << _OFFSET_BITS | offset): one
        # int, or a tuple of them where a few values share the gram (neither an object the
        # cyclic collector walks), or a list where many do.
        self._grams: dict[str, int | tuple[int, ...] | list[int]] = {}
        self._short_by: dict[frozenset[str], list[_Known]] = {}
        # The values matched exactly in long text, per ``detected``, and their index.
        self._long_by: dict[frozenset[str], tuple[list[_Known], ExactIndex]] = {}
        # Text read again unchanged (an argument a tool echoes, a record written and read back):
        # its places, by content hash, while the vault stays as it was.
        self._kept: dict[tuple[bytes, frozenset[str]], list[RecallHit]] = {}
        # The same texts' runs of hex and base64, decoded (``encoded``), by content hash.
        self._decoded: dict[bytes, list[tuple[int, int, str]]] = {}

    def forget_texts(self) -> None:
        """Let go of the places kept by digest (they say where values are in those texts),
        and of the runs decoded from them."""
        self._kept, self._decoded = {}, {}

    def encoded(
        self, text: str, *, shortest: int, digest: bytes | None = None
    ) -> Iterable[tuple[int, int, str]]:
        """``encoded_runs(text, shortest=shortest)``; with ``digest``, text of
        ``KEPT_MIN_CHARS`` or more is decoded once: a tool call's check of its argument and
        the tokenizing of a result that brings it back (an echo) both look into its runs, and
        finding them costs a millisecond per MB whether or not there are any."""
        if digest is None or len(text) < KEPT_MIN_CHARS or shortest < _MIN_EXACT:
            return encoded_runs(text, shortest=shortest)  # most strings: short ones
        held = self._decoded
        runs = held.get(digest)
        if runs is None:
            # Kept as the recall reads them: the tokenizer asks for longer ones only.
            runs = held[digest] = list(encoded_runs(text, shortest=_MIN_EXACT))
            if len(held) > _KEPT_TEXTS:
                # Parallel tool calls of one session share this: another may trim first.
                with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                    del held[next(iter(held))]
        return [run for run in runs if len(run[2]) >= shortest]

    def refresh(self) -> None:
        version = self.vault.version
        if version == self._version:
            return
        self._version = version
        self._short_by, self._long_by, self._kept = {}, {}, {}
        wiped, entries = self.vault.entries_after(len(self._known))
        if wiped:
            self._known, self._short, self._grams = [], [], {}
        # A result of records gives thousands of values at once: as many objects to index
        # them, no cycle among them, and each collection on the way walks every one the
        # process holds (most of a read of 5,000 contacts, measured).
        with paused_for(len(entries)):
            self._take(entries)

    def _take(self, entries: list[VaultEntry]) -> None:
        """Index ``entries``, the vault's newest (``refresh``)."""
        grams, get = self._grams, self._grams.get
        for entry in entries:
            known = _index(entry)
            index = len(self._known)
            self._known.append(known)
            skel = known.skeleton
            if not skel:
                if known.exact:
                    self._short.append(known)
                continue
            # Every fragment holds a gram starting at one of these offsets.
            low = max(0, known.last_start - _GRAM - _STRIDE + 1)
            high = min(known.first_end + _STRIDE - 1, len(skel) - _GRAM + 1)
            base = index << _OFFSET_BITS
            for offset in range(low, high):
                gram = skel[offset : offset + _GRAM]
                held = get(gram)
                if held is None:
                    grams[gram] = base | offset
                elif isinstance(held, int):
                    grams[gram] = (held, base | offset)
                elif isinstance(held, list):
                    held.append(base | offset)
                elif len(held) < _SHARED_AS_TUPLE:
                    grams[gram] = (*held, base | offset)
                else:
                    grams[gram] = [*held, base | offset]

    def find(
        self,
        text: str,
        *,
        detected: frozenset[str] = frozenset(),
        decode: bool = True,
        digest: bytes | None = None,
        covering: bool = False,
    ) -> list[RecallHit]:
        """Every place in ``text`` holding a known value or a fragment of one (may overlap).

        Values too short for fragments are matched exactly, unless of the ``detected`` kinds
        (which the detectors find by themselves). In text longer than ``FRAGMENT_SCAN_MAX``
        every value is matched exactly, those of the ``detected`` kinds only while the vault
        holds at most ``LONG_TEXT_ALL_VALUES`` values (each costs a pass over the text).
        ``decode``: look into runs of hex and base64 too (the tokenizer decodes them itself).
        ``digest``: the text's ``content_digest``; with it, text of ``KEPT_MIN_CHARS`` or more
        read before while the vault is unchanged is answered from what that reading found.
        ``covering``: only the fragments that take in every letter and digit of a short text
        (``KEPT_MIN_CHARS``; longer text: all of them). The tokenizer asks so where one value
        it detected holds them all: a shorter fragment inside it loses to it. A new address
        shares its domain and the end of its local part with hundreds of a CRM's addresses,
        which would each be judged a fragment of it first.
        """
        covering = covering and len(text) < KEPT_MIN_CHARS
        return self._find(text, detected, decode, each_place=True, digest=digest, covering=covering)

    def _find(
        self,
        text: str,
        detected: frozenset[str],
        decode: bool,
        *,
        each_place: bool,
        digest: bytes | None = None,
        covering: bool = False,
    ) -> list[RecallHit]:
        """``find``; without ``each_place``, a value matched exactly is one hit (where the
        text's places are kept by ``digest``, every place is: the callers take each value's
        entry, and finding every place costs about as much)."""
        if not self._known or len(text) < _MIN_EXACT:
            return []
        if digest is not None and len(text) >= KEPT_MIN_CHARS:
            held = self._kept
            kept = held.get((digest, detected))
            if kept is None:
                kept = held[digest, detected] = self._find_plain(text, detected)
                if len(held) > _KEPT_TEXTS:
                    # Parallel tool calls of one session share this: another may trim first.
                    with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                        del held[next(iter(held))]
            hits = list(kept)
        else:
            hits = self._find_plain(text, detected, each_place=each_place, covering=covering)
        if not decode:
            return hits
        for start, end, decoded in self.encoded(text, shortest=_MIN_EXACT, digest=digest):
            # A value in hex or base64 (``hex(email)`` from a SQL tool): the whole run goes.
            within = self._find_plain(decoded, frozenset())
            if within:
                hits.append(RecallHit(start, end, within[0].entry))
        return hits

    def _find_plain(
        self,
        text: str,
        detected: frozenset[str],
        *,
        each_place: bool = True,
        covering: bool = False,
    ) -> list[RecallHit]:
        hits: list[RecallHit] = []
        if len(text) > FRAGMENT_SCAN_MAX:
            values, index = self._long_of(detected)
            # Each value's places, found in one pass per rare character (``exact.py``).
            starts_of = index.starts(text, first=not each_place)
            for known, starts in zip(values, starts_of, strict=True):
                size, entry = len(known.exact), known.entry
                places = starts if each_place else starts[:1]
                hits.extend(_exact_hit(start, start + size, entry) for start in places)
            return hits
        for known in self._short_of(detected):
            if known.exact and known.exact in text:
                found = _exact_hits(text, known)
                hits.extend(found if each_place else (next(iter(found)),))
        if covering and hits:
            hits = [hit for hit in hits if _covers(text, hit.start, hit.end)]
        if self._grams:
            hits.extend(self._fragments(text, covering))
        return hits

    def _short_of(self, detected: frozenset[str]) -> list[_Known]:
        found = self._short_by.get(detected)
        if found is None:
            found = self._short_by[detected] = [
                k for k in self._short if k.entry.kind not in detected
            ]
        return found

    def _long_of(self, detected: frozenset[str]) -> tuple[list[_Known], ExactIndex]:
        found = self._long_by.get(detected)
        if found is None:
            every = len(self._known) <= LONG_TEXT_ALL_VALUES
            values = [k for k in self._known if k.exact and (every or k.entry.kind not in detected)]
            found = self._long_by[detected] = (values, ExactIndex([k.exact for k in values]))
        return found

    def entries_in(
        self,
        text: str,
        *,
        detected: frozenset[str] = frozenset(),
        digest: bytes | None = None,
    ) -> list[VaultEntry]:
        """The entries whose value (or a fragment) ``text`` holds, each once (``digest``: as
        for ``find``)."""
        seen: dict[str, VaultEntry] = {}
        # Which values, not where: a value in a MB of text is not listed at each place.
        for hit in self._find(text, detected, decode=True, each_place=False, digest=digest):
            seen.setdefault(hit.entry.token, hit.entry)
        return list(seen.values())

    def _fragments(self, text: str, covering: bool = False) -> Iterable[RecallHit]:
        lowered = text.lower()
        yield from self._runs(text, skeleton_of(lowered), lowered, None, covering)
        # "maria lopez at globex dot com" (the hint, searched faster, is part of any match)
        if _SPELLED_HINT.search(lowered) is not None and _SPELLED.search(lowered) is not None:
            spelled = _SPELLED.sub(_blank, lowered)
            found = self._runs(text, skeleton_of(spelled), spelled, spelled, False)
            # "at" and "dot" are letters of the text that a spelled hit leaves out.
            yield from (hit for hit in found if not covering or _covers(text, hit.start, hit.end))

    def _runs(
        self, text: str, skel: str, lowered: str, spelled: str | None, covering: bool = False
    ) -> Iterable[RecallHit]:
        """The fragments in ``text`` (``skel``: the skeleton of ``lowered``, which is ``text``
        lower-cased, or with ``at`` and ``dot`` blanked: ``spelled``); ``covering``: only those
        that take in all of ``skel``."""
        size = len(skel)
        if size < _MIN_SKELETON:
            return
        grams = self._grams
        starts: Iterable[int] = range(0, len(skel) - _GRAM + 1, _STRIDE)
        if covering:
            # A fragment that takes in all of ``skel`` is found from its first gram or from
            # its last: every value has the grams indexed (``refresh``) that start where a
            # fragment of it may start (an address: in its local part; a value of words:
            # anywhere) but a phone number's, which reach its last digits, as ``skel``'s last
            # gram does.
            starts = (0,) if size == _GRAM else (0, size - _GRAM)
        # Few grams: finding each one in the text (in C) costs less than looking up every
        # position (measured: a gram costs 45 ns + 0.45 ns per character, a position 80 ns),
        # and most texts hold none. Only the places found are then looked at, in order: the
        # same places the walk over every position stops at.
        elif len(grams) * (100 + len(skel)) <= 128 * len(skel):
            starts = _gram_places(skel, grams)
            if not starts:
                return
        positions: Offsets | None = None
        # Per value: the text's skeleton up to here is covered by a fragment found already.
        reach: dict[int, int] = {}
        for at in starts:
            places = grams.get(skel[at : at + _GRAM])
            if places is None:
                continue
            for place in (places,) if isinstance(places, int) else places:
                index, offset = place >> _OFFSET_BITS, place & _OFFSET_MASK
                if at < reach.get(index, 0):
                    continue
                known = self._known[index]
                # Covering, the value holds all of ``skel`` from ``offset - at`` on.
                if covering and not 0 <= offset - at <= len(known.skeleton) - size:
                    continue
                span = _extend(known, offset, skel, at, _GRAM)
                if span is None or (covering and (span[0] != 0 or span[1] != size)):
                    continue
                if known.local and not _may_cut(known, span):
                    continue
                if positions is None:
                    positions = Offsets(lowered)
                found = _judge(known, span, text, positions, spelled is not None)
                if found is None:
                    continue
                first, last = found
                reach[index] = last
                whole = span[2] == 0 and span[3] == len(known.skeleton)
                yield RecallHit(positions[first], positions[last - 1] + 1, known.entry, whole)


# "at" and "dot" written as words between the parts of an address.
_SPELLED = re.compile(r"(?<=[0-9a-z])[\s(\[{]+(?:at|dot)[\s)\]}]+(?=[0-9a-z])")
_SPELLED_HINT = re.compile(r"[\s(\[{](?:at|dot)[\s)\]}]")


def _gram_places(skel: str, grams: Iterable[str]) -> list[int]:
    """Every place in ``skel`` where one of ``grams`` starts, in order, on the stride."""
    return [at for at in places_of(skel, grams) if at % _STRIDE == 0]


def _blank(match: re.Match[str]) -> str:
    return " " * len(match.group())


def _index(entry: VaultEntry) -> _Known:
    value = entry.value if isinstance(entry.value, str) else str(entry.value)
    exact = value if len(value) >= _MIN_EXACT else ""
    skel = skeleton(value)
    if len(skel) < _MIN_SKELETON:
        return _Known(entry, exact, "", 0, 0)
    first_end, last_start, local = len(skel), 0, 0
    minimum = min(len(skel), fragment_chars(len(skel)))
    words: tuple[tuple[int, int], ...] = ()
    if entry.kind == "EMAIL" and "@" in value:
        # At least three characters of the local part must show: a shared domain with a
        # letter or two before it is not a fragment.
        local = len(skeleton(value.split("@", 1)[0]))
        first_end = max(1, local - min(local, 3) + 1)
        minimum = min(minimum, max(_MIN_SKELETON, local))  # the local part alone counts
    elif entry.kind == "PHONE":
        last_start = len(skel) - 3  # a shared area code is not a fragment: the end must show
    else:
        words = _plain_words(value)
    return _Known(entry, exact, skel, minimum, first_end, last_start, local, words)


def _plain_words(value: str) -> tuple[tuple[int, int], ...]:
    """The skeleton spans of a value's words of letters, if it has several words."""
    parts = [skeleton(part) for part in value.split()]
    if len(parts) < 2:
        return ()
    spans: list[tuple[int, int]] = []
    at = 0
    for part in parts:
        if part.isalpha():
            spans.append((at, at + len(part)))
        at += len(part)
    return tuple(spans)


def _extend(
    known: _Known, offset: int, text: str, at: int, size: int
) -> tuple[int, int, int, int] | None:
    """The spans in ``text`` and in the value's skeleton of the longest common run through a
    seed, if long enough."""
    value = known.skeleton
    left = 0
    while offset - left > 0 and at - left > 0 and value[offset - left - 1] == text[at - left - 1]:
        left += 1
    right = size
    while offset + right < len(value) and at + right < len(text):
        if value[offset + right] != text[at + right]:
            break
        right += 1
    if left + right < known.minimum or offset - left >= known.first_end:
        return None
    if offset + right <= known.last_start:
        return None
    return at - left, at + right, offset - left, offset + right


def _judge(
    known: _Known, span: tuple[int, int, int, int], text: str, at: Offsets, spelled: bool
) -> tuple[int, int] | None:
    """The part of a common run (``span``: in the text's skeleton, then in the value's) that
    is the value or a cut of it only the value would show, as a span of the text's skeleton;
    None if there is none. ``at``: the text's offset of each skeleton character; ``spelled``:
    the text's skeleton left out ``at`` and ``dot`` written as words."""
    text_start, text_end, start, end = span
    if start == 0 and end == len(known.skeleton):
        return text_start, text_end
    if spelled:  # only a whole address is looked for in its spelled-out form
        return None
    if known.local:
        return _email_cut(known, span, text, at)
    if _whole_words(known.words, start, end):  # some of its words, whole: shared words
        return None
    return text_start, text_end


def _whole_words(words: tuple[tuple[int, int], ...], start: int, end: int) -> bool:
    """Whether ``[start, end)`` is a run of consecutive words of letters of ``words``."""
    at = start
    for low, high in words:
        if low == at and high <= end:
            at = high
    return at == end and at > start


def _may_cut(known: _Known, span: tuple[int, int, int, int]) -> bool:
    """Whether a common run with an e-mail address may pass ``_email_cut`` (or is the whole
    address): its bounds in the value decide most runs without reading the text. Values that
    share a prefix (``user1500`` of ``user15000@...`` and ``user15001@...``) meet at every
    read of one of them: thousands of runs in a CRM export, each cut in the text otherwise."""
    _text_start, _text_end, start, end = span
    local, domain = known.local, len(known.skeleton) - known.local
    if start == 0 and end >= local:  # the whole value, or its whole local part
        return True
    return start <= local - min(local, 3) and end >= local + min(domain, 3) and start < local


def _email_cut(
    known: _Known, span: tuple[int, int, int, int], text: str, at: Offsets
) -> tuple[int, int] | None:
    text_start, text_end, start, end = span
    local, domain = known.local, len(known.skeleton) - known.local
    if start < local < end:
        # Across the @, written as "@" or in one word (a slug, a cut): the run is cut at the
        # nearest whitespace on each side (a name followed by a word is not an address:
        # "Maria Lopez, Globex", "Rowan Brown" against rowan_b@rowansystems.de).
        boundary = text_start + local - start
        head, tail = at[boundary - 1] + 1, at[boundary]
        if "@" in text[head:tail] or not _spaced(text[head:tail]):
            first, last = boundary - 1, boundary
            while first > text_start and not _spaced(text[at[first - 1] : at[first]]):
                first -= 1
            while last < text_end - 1 and not _spaced(text[at[last] : at[last + 1]]):
                last += 1
            low, high = start + first - text_start, start + last + 1 - text_start
            if (
                low <= local - min(local, 3)
                and high >= local + min(domain, 3)
                and high - low >= known.minimum
            ):
                return first, last + 1
    # The whole local part as a word of its own: a slug of it, not a name in a sentence nor
    # the start of a longer word.
    if start != 0 or end < local or local < _MIN_SKELETON:
        return None
    first, last = at[text_start], at[text_start + local - 1]
    alone = not text[first - 1 : first].isalnum() and not text[last + 1 : last + 2].isalnum()
    if alone and not _spaced(text[first:last]):
        return text_start, text_start + local
    return None


def _covers(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` holds every letter and digit of ``text`` (its skeleton)."""
    return not skeleton_of(text[:start].lower()) and not skeleton_of(text[end:].lower())


def _spaced(text: str) -> bool:
    return any(char.isspace() for char in text)


def _exact_hits(text: str, known: _Known) -> Iterable[RecallHit]:
    start = text.find(known.exact)
    while start >= 0:
        yield RecallHit(start, start + len(known.exact), known.entry)
        start = text.find(known.exact, start + 1)

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
too (``encoded.py``): a value so written is replaced, run and all. This module finds the runs;
``cuts.py`` says which count; ``shadows.py`` which need not be judged (those strictly inside a
span the tokenizer's detectors found, which it keeps over them).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from codemode.heap import paused_for
from codemode.privacy.cuts import (
    MIN_EXACT,
    MIN_SKELETON,
    Known,
    common_run,
    fragment_chars,
    judge,
    known_of,
    long_enough,
    may_cut,
    skeleton,
)
from codemode.privacy.encoded import encoded_runs
from codemode.privacy.exact import ExactIndex, places_of
from codemode.privacy.shadows import Shadows
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


class Recall:
    """The vault's values as a searchable index.

    ``refresh`` takes in the values added since the last call (the tokenizer calls it once
    per result or text, so values issued while one result is walked are recalled from the
    next one on).
    """

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self._version = -1
        self._known: list[Known] = []
        self._short: list[Known] = []  # values too short for fragments: exact matches only
        # 8 chars -> where they start in values (known index << _OFFSET_BITS | offset): one
        # int, or a tuple of them where a few values share the gram (neither an object the
        # cyclic collector walks), or a list where many do.
        self._grams: dict[str, int | tuple[int, ...] | list[int]] = {}
        self._short_by: dict[frozenset[str], list[Known]] = {}
        # The values matched exactly in long text, per ``detected``, and their index.
        self._long_by: dict[frozenset[str], tuple[list[Known], ExactIndex]] = {}
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
        if digest is None or len(text) < KEPT_MIN_CHARS or shortest < MIN_EXACT:
            return encoded_runs(text, shortest=shortest)  # most strings: short ones
        held = self._decoded
        runs = held.get(digest)
        if runs is None:
            # Kept as the recall reads them: the tokenizer asks for longer ones only.
            runs = held[digest] = list(encoded_runs(text, shortest=MIN_EXACT))
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
            known = known_of(entry)
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
        shadows: Collection[tuple[int, int]] = (),
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
        ``shadows``: spans of ``text`` the caller's detectors found (sorted, none overlapping),
        merged after with these hits, the longer span winning: a fragment strictly inside one
        of them is left out where that changes nothing the merge keeps (``shadows.py``; not
        where the places are kept by ``digest``, nor with ``covering``).
        """
        covering = covering and len(text) < KEPT_MIN_CHARS
        if covering:
            shadows = ()
        return self._find(
            text,
            detected,
            decode,
            each_place=True,
            digest=digest,
            covering=covering,
            shadows=shadows,
        )

    def _find(
        self,
        text: str,
        detected: frozenset[str],
        decode: bool,
        *,
        each_place: bool,
        digest: bytes | None = None,
        covering: bool = False,
        shadows: Collection[tuple[int, int]] = (),
    ) -> list[RecallHit]:
        """``find``; without ``each_place``, a value matched exactly is one hit (where the
        text's places are kept by ``digest``, every place is: the callers take each value's
        entry, and finding every place costs about as much)."""
        if not self._known or len(text) < MIN_EXACT:
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
            hits = self._find_plain(
                text, detected, each_place=each_place, covering=covering, shadows=shadows
            )
        if not decode:
            return hits
        for start, end, decoded in self.encoded(text, shortest=MIN_EXACT, digest=digest):
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
        shadows: Collection[tuple[int, int]] = (),
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
            lowered = text.lower()
            shade = Shadows.of(shadows, text, lowered) if shadows else None
            found = list(self._fragments(text, lowered, covering, shade))
            if shade is not None and shade.pruned:
                spans = [(hit.start, hit.end) for hit in (*hits, *found)]
                if shade.spoiled or shade.overtaken(spans):
                    # As if none were skipped.
                    found = list(self._fragments(text, lowered, covering))
            hits.extend(found)
        return hits

    def _short_of(self, detected: frozenset[str]) -> list[Known]:
        found = self._short_by.get(detected)
        if found is None:
            found = self._short_by[detected] = [
                k for k in self._short if k.entry.kind not in detected
            ]
        return found

    def _long_of(self, detected: frozenset[str]) -> tuple[list[Known], ExactIndex]:
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

    def _fragments(
        self, text: str, lowered: str, covering: bool = False, shadows: Shadows | None = None
    ) -> Iterable[RecallHit]:
        """The fragments in ``text`` (``lowered``: the same, lower-cased)."""
        yield from self._runs(text, skeleton_of(lowered), lowered, None, covering, shadows)
        # "maria lopez at globex dot com" (the hint, searched faster, is part of any match)
        if _SPELLED_HINT.search(lowered) is not None and _SPELLED.search(lowered) is not None:
            spelled = _SPELLED.sub(_blank, lowered)
            found = self._runs(text, skeleton_of(spelled), spelled, spelled, False)
            # "at" and "dot" are letters of the text that a spelled hit leaves out.
            yield from (hit for hit in found if not covering or _covers(text, hit.start, hit.end))

    def _runs(
        self,
        text: str,
        skel: str,
        lowered: str,
        spelled: str | None,
        covering: bool = False,
        shadows: Shadows | None = None,
    ) -> Iterable[RecallHit]:
        """The fragments in ``text`` (``skel``: the skeleton of ``lowered``, which is ``text``
        lower-cased, or with ``at`` and ``dot`` blanked: ``spelled``); ``covering``: only those
        that take in all of ``skel``; ``shadows``: skip the runs strictly inside them (and stop
        once a value skipped so would be judged again: ``Shadows.spoiled``)."""
        size = len(skel)
        if size < MIN_SKELETON:
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
        # Per value and diagonal (its offset less the text's): where the common run last
        # found on it ends in the text. A seed inside it lies in the same run, judged already:
        # without this, a long value that repeats its words (a contract's clauses) was
        # compared again from each of thousands of seeds, in time that grew as a square.
        runs: dict[tuple[int, int], int] = {}
        for at in starts:
            places = grams.get(skel[at : at + _GRAM])
            if places is None:
                continue
            for place in (places,) if isinstance(places, int) else places:
                index, offset = place >> _OFFSET_BITS, place & _OFFSET_MASK
                if at < reach.get(index, 0):
                    continue
                known = self._known[index]
                if known.minimum > size:  # no fragment of it fits in the text
                    continue
                # Covering, the value holds all of ``skel`` from ``offset - at`` on.
                if covering and not 0 <= offset - at <= len(known.skeleton) - size:
                    continue
                diagonal = (index, offset - at)
                if at < runs.get(diagonal, 0):
                    continue
                if shadows is not None:
                    # All the value can take in along this diagonal, then the run it does.
                    low = max(at - offset, 0)
                    if shadows.skip(index, low, min(at - offset + len(known.skeleton), size)):
                        continue
                span = common_run(known, offset, skel, at, _GRAM)
                runs[diagonal] = span[1]
                if shadows is not None:
                    if shadows.skip(index, span[0], span[1]):
                        continue
                    if index in shadows.skipped_values:
                        shadows.spoiled = True  # a skipped run's hit might have stopped this
                        return
                if not long_enough(known, span) or (covering and (span[0] != 0 or span[1] != size)):
                    continue
                if known.local and not may_cut(known, span):
                    continue
                if positions is None:
                    positions = Offsets(lowered)
                found = judge(known, span, text, positions, spelled is not None)
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


def _covers(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` holds every letter and digit of ``text`` (its skeleton)."""
    return not skeleton_of(text[:start].lower()) and not skeleton_of(text[end:].lower())


def _exact_hits(text: str, known: Known) -> Iterable[RecallHit]:
    start = text.find(known.exact)
    while start >= 0:
        yield RecallHit(start, start + len(known.exact), known.entry)
        start = text.find(known.exact, start + 1)

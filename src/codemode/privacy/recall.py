"""Find values the vault already holds, and fragments of them, in later text.

Hostile code, or an upstream that echoes its input, can bring a hidden value back in another
shape: half of an address in a truncated error message, the address turned into a document id
(``doc-maria-lopez-globex-example-com``), a value rebuilt piece by piece. ``Recall`` compares
text with every value of the vault in two ways:

exact      a value too short for fragments (4 to 7 letters and digits), as it was seen,
           anywhere in the text;
skeleton   both sides reduced to lower-case letters and digits; a run of at least
           ``fragment_chars(value)`` characters of the value's skeleton (about 40% of it, and 8
           or more) found in the text's skeleton is a fragment. For an e-mail address the run
           must hold three characters of the local part (all of a shorter one; a shared company
           domain is not a fragment), and the local part alone counts; for a phone number the
           run must reach its last three digits (a shared area code is not a fragment).

Skeleton matching runs on strings up to ``FRAGMENT_SCAN_MAX`` characters (results are made of
small strings; printed output is capped) through an index of the values' 8-character pieces;
longer strings get exact matching only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from codemode.privacy.vault import Vault, VaultEntry

__all__ = [
    "FRAGMENT_SCAN_MAX",
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
_NOT_ALNUM = re.compile(r"[^0-9a-z]+")
_ALNUM = re.compile(r"[0-9a-z]")
# The text is looked up at every position, 8 characters (the shortest fragment) at a time.
_GRAM = 8
_STRIDE = 1


def skeleton(text: str) -> str:
    """Lower-case ASCII letters and digits of ``text``, in order."""
    return _NOT_ALNUM.sub("", text.lower())


def fragment_chars(skeleton_length: int) -> int:
    """How much of a value's skeleton must show for a fragment to count."""
    return max(_MIN_SKELETON, math.ceil(skeleton_length * 0.4))


@dataclass(frozen=True, slots=True)
class RecallHit:
    """``text[start:end]`` holds ``entry``'s value or a fragment of it."""

    start: int
    end: int
    entry: VaultEntry


@dataclass(frozen=True, slots=True)
class _Known:
    entry: VaultEntry
    exact: str
    skeleton: str
    minimum: int  # fragment length
    first_end: int  # a fragment must start before this offset of the skeleton
    last_start: int = 0  # ... and end after this one


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
        self._grams: dict[str, list[tuple[int, int]]] = {}  # 8 chars -> (known index, offset)
        self._short_by: dict[frozenset[str], list[_Known]] = {}

    def refresh(self) -> None:
        version = self.vault.version
        if version == self._version:
            return
        self._version = version
        self._short_by = {}
        entries = list(self.vault.entries())
        if len(entries) < len(self._known):  # wiped
            self._known, self._short, self._grams = [], [], {}
        for entry in entries[len(self._known) :]:
            known = _index(entry)
            index = len(self._known)
            self._known.append(known)
            if not known.skeleton:
                if known.exact:
                    self._short.append(known)
                continue
            # Every fragment holds a gram starting at one of these offsets.
            low = max(0, known.last_start - _GRAM - _STRIDE + 1)
            high = min(known.first_end + _STRIDE - 1, len(known.skeleton) - _GRAM + 1)
            for offset in range(low, high):
                gram = known.skeleton[offset : offset + _GRAM]
                self._grams.setdefault(gram, []).append((index, offset))

    def find(self, text: str, *, detected: frozenset[str] = frozenset()) -> list[RecallHit]:
        """Every place in ``text`` holding a known value or a fragment of one (may overlap).

        Values too short for fragments are matched exactly, unless of the ``detected`` kinds
        (which the detectors find by themselves). In text longer than ``FRAGMENT_SCAN_MAX``
        every value is matched exactly, those of the ``detected`` kinds only while the vault
        holds at most ``LONG_TEXT_ALL_VALUES`` values (each costs a pass over the text).
        """
        if not self._known or len(text) < _MIN_EXACT:
            return []
        hits: list[RecallHit] = []
        long_text = len(text) > FRAGMENT_SCAN_MAX
        candidates = self._short_of(detected)
        if long_text:
            every = len(self._known) <= LONG_TEXT_ALL_VALUES
            candidates = [k for k in self._known if every or k.entry.kind not in detected]
        for known in candidates:
            if known.exact and known.exact in text:
                hits.extend(_exact_hits(text, known))
        if self._grams and not long_text:
            hits.extend(self._fragments(text))
        return hits

    def _short_of(self, detected: frozenset[str]) -> list[_Known]:
        found = self._short_by.get(detected)
        if found is None:
            found = self._short_by[detected] = [
                k for k in self._short if k.entry.kind not in detected
            ]
        return found

    def entries_in(self, text: str, *, detected: frozenset[str] = frozenset()) -> list[VaultEntry]:
        """The entries whose value (or a fragment) ``text`` holds, each once."""
        seen: dict[str, VaultEntry] = {}
        for hit in self.find(text, detected=detected):
            seen.setdefault(hit.entry.token, hit.entry)
        return list(seen.values())

    def _fragments(self, text: str) -> Iterable[RecallHit]:
        lowered = text.lower()
        skel = _NOT_ALNUM.sub("", lowered)
        if len(skel) < _MIN_SKELETON:
            return
        grams = self._grams
        positions: list[int] | None = None
        done: set[int] = set()
        reach = 0  # the text's skeleton up to here is covered by a fragment found already
        for at in range(0, len(skel) - _GRAM + 1, _STRIDE):
            places = grams.get(skel[at : at + _GRAM])
            if places is None or at < reach:
                continue
            for index, offset in places:
                known = self._known[index]
                span = _extend(known, offset, skel, at, _GRAM)
                if span is None or (index in done and span[1] <= reach):
                    continue
                done.add(index)
                reach = max(reach, span[1])
                if positions is None:
                    positions = [m.start() for m in _ALNUM.finditer(lowered)]
                yield RecallHit(positions[span[0]], positions[span[1] - 1] + 1, known.entry)


def _index(entry: VaultEntry) -> _Known:
    value = entry.value if isinstance(entry.value, str) else str(entry.value)
    exact = value if len(value) >= _MIN_EXACT else ""
    skel = skeleton(value)
    if len(skel) < _MIN_SKELETON:
        return _Known(entry, exact, "", 0, 0)
    first_end, last_start = len(skel), 0
    minimum = min(len(skel), fragment_chars(len(skel)))
    if entry.kind == "EMAIL" and "@" in value:
        # At least three characters of the local part must show: a shared domain with a
        # letter or two before it is not a fragment.
        local = len(skeleton(value.split("@", 1)[0]))
        first_end = max(1, local - min(local, 3) + 1)
        minimum = min(minimum, max(_MIN_SKELETON, local))  # the local part alone counts
    elif entry.kind == "PHONE":
        last_start = len(skel) - 3  # a shared area code is not a fragment: the end must show
    return _Known(entry, exact, skel, minimum, first_end, last_start)


def _extend(known: _Known, offset: int, text: str, at: int, size: int) -> tuple[int, int] | None:
    """The span in ``text`` of the longest common run through a seed, if long enough."""
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
    return at - left, at + right


def _exact_hits(text: str, known: _Known) -> Iterable[RecallHit]:
    start = text.find(known.exact)
    while start >= 0:
        yield RecallHit(start, start + len(known.exact), known.entry)
        start = text.find(known.exact, start + 1)

"""What the host knows: the session's hidden values, and the pieces of them that calls carry.

The code holds a hidden value only as its token (``<EMAIL_1>``); the host holds the value. So
the host can tell when call arguments carry pieces of it, however they are written:
``Knowledge.pieces`` folds each argument (NFKC, case, look-alike letters from Cyrillic and
Greek), keeps its letters and digits (whitespace, punctuation and the wildcards ``%``, ``_``,
``*``, ``?`` go), and finds the runs it shares with each hidden value, read forwards and
backwards. A run counts from three characters (six when it is digits only: ids, dates, amounts
and invoice numbers are not pieces of a phone number, so numbers are left to the budgets); a
whole argument of two characters that the value holds counts
too (the first steps of a probe), and so do the characters of a pattern that puts them in a
known place (``j%``: the value starts with ``j``; ``___r%``: its fourth character is ``r``;
``??[a-m]*``: its third is one of a to m), written alone or quoted inside a query
(``codemode.privacy.patterns``).
Words the session has received in clear (``saw``: a name, a
company), and the starts of such words (``Kof`` as one types ``Kofi``), are not hidden: their
characters count for no piece; nor, for a pattern quoted inside a query (which may test a name
column), do the places of a value inside such words.

A run made only of three-character pieces that many values share (``example`` in every
address of a company) is not a piece of any of them: it tells nothing about one value, and
skipping it keeps the search fast (a KiB of prose against a thousand addresses). Arguments are
searched up to 16 KiB per string (longer text is left to the recall's flow check). A piece is
reported as the positions of the value it reveals, for the oracle guard to add up.
"""

from __future__ import annotations

import bisect
import re
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain, compress, count
from typing import Any

from codemode.heap import paused_for
from codemode.privacy.exact import places_of
from codemode.privacy.patterns import patterns_in
from codemode.privacy.tokenizer import OUTPUT_SOURCE
from codemode.privacy.vault import TOKEN_PATTERN, Vault, VaultEntry

__all__ = ["Hidden", "Knowledge", "Piece", "fold", "words_of"]

# Letters that look like Latin ones (Cyrillic, Greek), which NFKC leaves as they are.
_CONFUSABLES = str.maketrans(
    "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501\u051b\u051d"
    "\u043a\u043c\u043d\u0442\u0432\u0433\u0261"  # Cyrillic (and a Latin script g)
    "\u03b1\u03b5\u03b9\u03ba\u03bd\u03bf\u03c1\u03c4\u03c5\u03c7\u03b2",  # Greek
    "aeopcyxijsdqwkmhtbrgaeiknoptuxb",
)
_NOT_ALNUM = re.compile(r"[^0-9a-z]+")
_ALNUM_RUN = re.compile(r"[0-9a-z]+")
_LETTERS_OR_DIGITS = re.compile(r"[a-z]+|[0-9]+")
_PATTERN_CHARS = frozenset("%*_?[")
_GRAM = 3
#: A run made only of pieces more values than this share (``example.com``) is not a piece.
_COMMON = 8
_MIN_DIGITS = 6
#: Up to this many rare grams, each is looked for in an argument with ``str.find``.
_FEW_GRAMS = 64
#: Words remembered as seen in clear, per session (beyond it, new words are not remembered).
_MAX_PUBLIC = 200_000
_MAX_LEAVES = 256
_MAX_SEEN_CHARS = 4 << 20  # of one result
_MAX_ARGUMENT_CHARS = 16_384
#: Lines compared before a result's repeated lines are read once (``_distinct_lines``).
_SAMPLE_LINES = 16


# Bytes that end a word (all but ASCII digits and lower-case letters) become spaces.
_WORD_BYTES = bytes(c if 48 <= c <= 57 or 97 <= c <= 122 else 32 for c in range(256))


def words_of(folded: str) -> set[str]:
    """The distinct runs of letters and digits of ``folded`` text (from ``fold``) that are at
    least three characters long: short ones would let "j o r" pass as words seen in clear."""
    if folded.isascii():
        folded = _distinct_lines(folded)
        # A MiB of ASCII text in a third of the regular expression's time (most results).
        runs = set(folded.encode("ascii").translate(_WORD_BYTES).split())
        return {run.decode("ascii") for run in runs if len(run) >= _GRAM}
    return {word for word in set(_ALNUM_RUN.findall(folded)) if len(word) >= _GRAM}


def _alnum_runs(folded: str) -> list[str]:
    """``_ALNUM_RUN.findall(folded)``: for ASCII text, a byte map and a split (a sixth of the
    time: every argument of a session holding hidden values is read so)."""
    if folded.isascii():
        return folded.encode("ascii").translate(_WORD_BYTES).decode("ascii").split()
    return _ALNUM_RUN.findall(folded)


def _distinct_lines(text: str) -> str:
    """``text`` with each line once, when its first lines repeat (a report's rows, a page of
    records alike): a line break ends a word, so the words are the same, read in a fraction
    of the time. Text whose first lines differ is returned as it is, at no cost."""
    head = text.split("\n", _SAMPLE_LINES)[:-1]
    if len(head) < _SAMPLE_LINES or len(set(head)) > _SAMPLE_LINES // 2:
        return text
    lines = text.split("\n")
    distinct = set(lines)
    return "\n".join(distinct) if len(distinct) < len(lines) else text


def fold(text: str) -> str:
    """``text`` in NFKC, case-folded, with look-alike letters made Latin."""
    if text.isascii():  # NFKC and the look-alikes leave ASCII as it is: a MiB in a fifth
        return text.lower()
    return unicodedata.normalize("NFKC", text).casefold().translate(_CONFUSABLES)


@dataclass(frozen=True, slots=True)
class Hidden:
    """A value the session holds only as ``token``, as letters and digits."""

    token: str
    skeleton: str
    origins: frozenset[str]
    raw: str  # folded, as written


@dataclass(frozen=True, slots=True)
class Piece:
    """A run ``[start, end)`` of a hidden value's letters and digits that an argument carries;
    ``hidden``: the positions it shows that the code was not given in clear; ``placed``: put
    in place by a pattern (``___r%``) rather than found as a run."""

    start: int
    end: int
    hidden: frozenset[int]
    placed: bool = False

    def grows(self, earlier: Piece) -> bool:
        """Whether this piece extends ``earlier``: it holds it and more, or it is the next
        character a pattern places after it."""
        if self.placed and earlier.placed and self.start in (earlier.end, earlier.start - 1):
            return True
        inside = self.start <= earlier.start and earlier.end <= self.end
        return inside and self.end - self.start > earlier.end - earlier.start


class Knowledge:
    """One session's hidden values (from its vault) and the words it has seen in clear."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self._lock = threading.Lock()
        self._version = -1
        self._count = 0
        self.values: list[Hidden] = []
        # The places of each gram few values hold (``_COMMON``): only those are seeds.
        self._grams: dict[str, list[tuple[int, int]]] = {}
        self._spread: dict[str, int] = {}  # gram -> how many values hold it
        self._rare: frozenset[str] = frozenset()  # grams that few values hold
        self._rare_chars: frozenset[tuple[str, ...]] = frozenset()  # the same, as tuples
        self._public: set[str] = set()
        self._public_sorted: list[str] = []  # the same words in order, for prefix look-ups

    def saw(self, result: Any) -> None:
        """The code received ``result`` (tokenized): its words are not hidden from it."""
        with self._lock:
            room = _MAX_PUBLIC - len(self._public)
            if room <= 0:
                return
            budget = _MAX_SEEN_CHARS
            texts: list[str] = []
            for text in _texts(result, keys=True, items=None):
                if budget <= 0:
                    break
                budget -= len(text)
                texts.append(text[:_MAX_SEEN_CHARS])
            # Read as one text, a string a line (a line break ends a word, and folding keeps
            # to each character): a result of many small strings (5,000 records) was read a
            # string at a time, each with new words sorting every word seen so far again.
            # Repeated lines are dropped before folding, which then folds only the rest.
            new = words_of(fold(_distinct_lines("\n".join(texts)))) - self._public
            if not new:
                return
            fresh = sorted(new)[:room]
            self._public.update(fresh)
            # Two sorted runs: the sort merges them in one pass (no insort per word).
            self._public_sorted.extend(fresh)
            self._public_sorted.sort()

    def forget_index(self) -> None:
        """Let go of the index of hidden values (the session went idle): the next ``pieces``
        builds it again from the vault, in the same order. The words seen in clear stay."""
        with self._lock:
            self.values, self._grams, self._spread, self._count = [], {}, {}, 0
            self._rare, self._rare_chars = frozenset(), frozenset()
            self._version = -1

    def pieces(self, arguments: Any) -> dict[int, list[Piece]]:
        """Per hidden value (its index in ``values``), the pieces the arguments carry."""
        self._refresh()
        found: dict[int, list[Piece]] = {}
        for leaf in _texts(arguments):
            text = leaf[:_MAX_ARGUMENT_CHARS]
            if not _PATTERN_CHARS.isdisjoint(text) or "substr" in text.casefold():
                for index, piece in self._placed(text):
                    found.setdefault(index, []).append(piece)
            skeleton, public = self._skeleton(text)
            if len(skeleton) < 2:
                continue
            for chars, hidden in ((skeleton, public), (skeleton[::-1], public[::-1])):
                for index, piece in self._runs(chars, hidden):
                    found.setdefault(index, []).append(piece)
        return found

    def _placed(self, text: str) -> Iterator[tuple[int, Piece]]:
        """``jo%``, ``___r%``, ``??[a-m]*``: the characters patterns put in known places of
        a value, one piece per stretch of them."""
        longest = max((len(value.raw) for value in self.values), default=0)
        for pattern in patterns_in(fold(text), longest=longest):
            for index, value in enumerate(self.values):
                fixed = pattern.fixes(value.raw)
                if not fixed:
                    continue
                chars = [value.raw[at] for at in fixed]
                if all(c.isdigit() for c in chars) and len(chars) < _MIN_DIGITS:
                    continue
                # A pattern inside a query may test another column (a name the code was given):
                # there, places in words seen in clear show nothing hidden.
                known = self._known_places(value) if pattern.inside else frozenset()
                positions = [
                    len(_NOT_ALNUM.sub("", value.raw[:at]))
                    for at in fixed
                    if _NOT_ALNUM.match(value.raw[at]) is None and at not in known
                ]
                yield from ((index, piece) for piece in _stretches(positions))

    def _known(self, word: str) -> bool:
        """Whether ``word`` is a word seen in clear or the start of one (of three characters or
        more, so that letters spaced out, ``j o r``, still count): typing a name the code was
        given (``Kof``, ``Kofi Oka``) shows nothing hidden."""
        if word in self._public:
            return True
        if len(word) < _GRAM:
            return False
        at = bisect.bisect_left(self._public_sorted, word)
        return at < len(self._public_sorted) and self._public_sorted[at].startswith(word)

    def _known_places(self, value: Hidden) -> frozenset[int]:
        """The places of ``value.raw`` inside words seen in clear (``kofi`` in ``kofi11@``)."""
        return frozenset(
            at
            for word in _LETTERS_OR_DIGITS.finditer(value.raw)
            if word.group() in self._public
            for at in range(word.start(), word.end())
        )

    def _skeleton(self, text: str) -> tuple[str, list[bool]]:
        """The letters and digits of ``text`` folded, and for each whether it is hidden."""
        words = _alnum_runs(fold(TOKEN_PATTERN.sub(" ", text)))
        # Text repeats its words: each is looked up once, and the flags joined in C.
        flags = {word: [not self._known(word)] * len(word) for word in set(words)}
        hidden = list(chain.from_iterable(map(flags.__getitem__, words)))
        return "".join(words), hidden

    def _runs(self, chars: str, hidden: list[bool]) -> Iterator[tuple[int, Piece]]:
        if len(chars) == 2 and all(hidden) and not chars.isdigit():  # a probe's first steps
            for index, value in enumerate(self.values):
                at = value.skeleton.find(chars)
                if at >= 0:
                    yield index, Piece(at, at + 2, frozenset((at, at + 1)))
            return
        grams, rare, rare_chars = self._grams, self._rare, self._rare_chars
        done: set[tuple[int, int, int]] = set()
        emitted: set[tuple[int, Piece]] = set()
        # A run is found from a gram few values share (fast, and specific).
        for at in _seeds(chars, rare, rare_chars):
            # A refresh in another call may have found the gram common since: no seed now.
            for index, offset in grams.get(chars[at : at + _GRAM], ()):
                known = self.values[index].skeleton
                left = 0
                while left < min(at, offset) and known[offset - left - 1] == chars[at - left - 1]:
                    left += 1
                start = at - left
                if (index, at - offset, start) in done:
                    continue
                done.add((index, at - offset, start))
                size = left + _GRAM
                while (
                    start + size < len(chars)
                    and offset - left + size < len(known)
                    and chars[start + size] == known[offset - left + size]
                ):
                    size += 1
                if chars[start : start + size].isdigit() and size < _MIN_DIGITS:
                    continue
                first = offset - left
                revealed = frozenset(first + i for i in range(size) if hidden[start + i])
                piece = Piece(first, first + size, revealed)
                if revealed and (index, piece) not in emitted:
                    emitted.add((index, piece))
                    yield index, piece

    def _refresh(self) -> None:
        with self._lock:
            if self.vault.version == self._version:
                return
            self._version = self.vault.version
            wiped, entries = self.vault.entries_after(self._count)
            if wiped:
                self.values, self._grams, self._spread, self._count = [], {}, {}, 0
            with paused_for(len(entries)):  # thousands at once, as ``Recall.refresh`` says
                self._take(entries)

    def _take(self, entries: list[VaultEntry]) -> None:
        """Index ``entries``, the vault's newest (``_refresh``, with the lock held)."""
        grams, spread = self._grams, self._spread
        for entry in entries:
            self._count += 1
            origins = frozenset(entry.origins) - {OUTPUT_SOURCE}
            raw = fold(str(entry.value))
            skeleton = _NOT_ALNUM.sub("", raw)
            if not origins or len(skeleton) < 2 * _GRAM:
                continue
            index = len(self.values)
            self.values.append(Hidden(entry.token, skeleton, origins, raw))
            for gram in {skeleton[i : i + _GRAM] for i in range(len(skeleton) - _GRAM + 1)}:
                spread[gram] = holders = spread.get(gram, 0) + 1
                if holders == _COMMON + 1:
                    # Common now, and for good (values are only added): never a seed
                    # again, so its places are never read (a CRM's thousands of
                    # addresses put ``com`` and ``exa`` in every one).
                    del grams[gram]
            for offset in range(len(skeleton) - _GRAM + 1):
                gram = skeleton[offset : offset + _GRAM]
                if spread[gram] <= _COMMON:
                    grams.setdefault(gram, []).append((index, offset))
        self._rare = frozenset(grams)
        self._rare_chars = frozenset(map(tuple, self._rare))


def _seeds(
    chars: str, rare: frozenset[str], rare_chars: frozenset[tuple[str, ...]] | None = None
) -> list[int]:
    """Where in ``chars`` a rare gram starts, in order. Few grams (a vault of some values) are
    each looked for in the whole text, at the speed of ``str.find``; many, position by
    position (``rare_chars``: the grams as tuples of characters, made here if not given)."""
    if len(rare) > _FEW_GRAMS:
        if rare_chars is None:
            rare_chars = frozenset(map(tuple, rare))
        # Every position's gram as a tuple, looked up and kept in C: twice the speed of a loop
        # (the shifted copies are shorter: the last grams end the text).
        grams = zip(*(chars[at:] for at in range(_GRAM)), strict=False)
        return list(compress(count(), map(rare_chars.__contains__, grams)))
    return places_of(chars, rare)


def _stretches(positions: list[int]) -> Iterator[Piece]:
    """Placed pieces, one per run of consecutive positions."""
    start = previous = -2
    for position in [*sorted(set(positions)), -1]:
        if position != previous + 1:
            if start >= 0:
                yield Piece(start, previous + 1, frozenset(range(start, previous + 1)), True)
            start = position
        previous = position


def _texts(value: Any, *, keys: bool = False, items: int | None = _MAX_LEAVES) -> Iterator[str]:
    """Every string and number of JSON-like data, in order, with ``keys`` dict keys too
    (parameter names are not data); of lists the first ``items`` items (None: all). Walked
    with a stack of its own, not a generator per level: 5,000 records in two thirds of the
    time, and no depth is too deep."""
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        value = pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int | float):
            yield str(value)
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):  # the last pushed comes out first
                push(item)
                if keys and isinstance(key, str):
                    push(key)
        elif isinstance(value, list | tuple):
            stack.extend(reversed(value[:items]))

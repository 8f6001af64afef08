"""Where a vault's values occur, written as they are, in a long text.

``str.find`` per value reads the whole text once for each value: a tenth of a millisecond per
value and MiB. Most values hold a character that text seldom has (the ``@`` of an address, the
``+`` of a phone number): ``ExactIndex`` groups the values by such a character, finds its
places in the text once (``str.find`` of one character runs at memory speed), and compares
only the values whose next characters match there. Values without one, and groups whose
character the text has too often for this to pay, are found with ``str.find`` as before.

Every place of a value is found, overlapping ones too, each once: an occurrence of a value
holds its rare character's first occurrence at one place of the text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["ExactIndex", "places_of"]

# Rarest first, in prose and in tool results alike.
_RARE = "@#$%&*+=~^|\\<>[]{}_;!?/()'\""
_RARE_SET = frozenset(_RARE)
# Characters of a value before and from its rare one that pick the values to compare at a
# place (an address's domain is shared: the end of its local part tells more).
_BEFORE = 6
_AFTER = 6
# A rare character's places read, and values compared there, per MiB and value of its group
# before ``str.find`` per value is cheaper (measured: a place or a comparison costs about
# 0.3 us, a value's find 0.2 ms per MiB).
_PLACES_PER_MIB = 512

# Characters taken before and from the rare one, and what they read -> (value, offset).
_Shape = tuple[int, int, dict[str, list[tuple[int, int]]]]


@dataclass(frozen=True, slots=True)
class _Group:
    char: str
    shapes: tuple[_Shape, ...]
    members: tuple[int, ...]


class ExactIndex:
    """The places of ``values`` in a text, for a text read once per rare character."""

    def __init__(self, values: Sequence[str]) -> None:
        self.values = tuple(values)
        plain: list[int] = []
        chosen: dict[str, list[tuple[int, int]]] = {}
        for index, value in enumerate(self.values):
            held = _RARE_SET.intersection(value)
            if not held:
                plain.append(index)
                continue
            # The rarest character the value holds, at its first place in the value.
            char = min(held, key=_RARE.index)
            chosen.setdefault(char, []).append((index, value.index(char)))
        self._plain = tuple(plain)
        self._groups = tuple(self._group(char, members) for char, members in chosen.items())

    def _group(self, char: str, members: list[tuple[int, int]]) -> _Group:
        shapes: dict[tuple[int, int], dict[str, list[tuple[int, int]]]] = {}
        for index, at in members:
            value = self.values[index]
            before, after = min(_BEFORE, at), min(_AFTER, len(value) - at)
            by_key = shapes.setdefault((before, after), {})
            by_key.setdefault(value[at - before : at + after], []).append((index, at))
        return _Group(
            char,
            tuple((before, after, by_key) for (before, after), by_key in shapes.items()),
            tuple(index for index, _at in members),
        )

    def starts(self, text: str, *, first: bool = False) -> list[list[int]]:
        """Per value, where in ``text`` it starts, in order (the places ``str.find`` gives,
        each place after the last plus one); with ``first``, only where it first does."""
        found: list[list[int]] = [[] for _ in self.values]
        by_find = list(self._plain)
        for group in self._groups:
            if not self._anchored(group, text, found, first):
                by_find.extend(group.members)
        for index in by_find:
            value, places = self.values[index], found[index]
            start = text.find(value)
            while start >= 0:
                places.append(start)
                start = -1 if first else text.find(value, start + 1)
        return found

    def _anchored(
        self, group: _Group, text: str, found: list[list[int]], first: bool = False
    ) -> bool:
        """Fill ``found`` for the group's values from the places of its character; False (and
        nothing filled) when the text has too many of them, or they start too many values'
        first characters (numbers of one area code in a list of them), for that to pay."""
        budget = len(group.members) * max(64, len(text) * _PLACES_PER_MIB >> 20)
        places: list[int] = []
        at = text.find(group.char)
        while at >= 0:
            if len(places) >= budget:
                return False
            places.append(at)
            at = text.find(group.char, at + 1)
        budget -= len(places)  # what is left for comparisons
        hits: list[tuple[int, int]] = []
        seen: set[int] = set()  # with ``first``: the values found already
        for at in places:
            for before, after, by_key in group.shapes:
                # A value that starts before the text does not fit (nor may the slice wrap).
                candidates = by_key.get(text[at - before : at + after]) if at >= before else None
                if candidates is None:
                    continue
                budget -= len(candidates)
                if budget < 0:
                    return False
                for index, offset in candidates:
                    start = at - offset
                    if index in seen or start < 0 or not text.startswith(self.values[index], start):
                        continue
                    hits.append((index, start))
                    if first:
                        seen.add(index)
            if first and len(seen) == len(group.members):
                break
        for index, start in hits:  # places in order: each value's starts in order
            found[index].append(start)
        return True


def places_of(text: str, needles: Iterable[str]) -> list[int]:
    """Every place in ``text`` where one of ``needles`` starts (overlapping ones too), in
    order: each needle found with ``str.find``, at memory speed (for a few needles, faster
    than looking at every position of the text)."""
    found: set[int] = set()
    for needle in needles:
        at = text.find(needle)
        while at >= 0:
            found.add(at)
            at = text.find(needle, at + 1)
    return sorted(found)

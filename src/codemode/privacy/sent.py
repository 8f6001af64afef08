"""The texts a call's arguments held as the code wrote them.

A result that hands one of them back unchanged (an echo, a record created and returned with the
fields sent, a document passed through) hands the code nothing it did not hold, so the
tokenizer returns it as it is: no scan, and no token minted for the code's own words as if the
tool had sent them (which would then count as that server's data for the flow rules). The
arguments are taken before tokens in them are put back: a text that held a token and returns
with the value in its place is not the code's own, and is tokenized as ever.

A result text that holds one of them whole inside it (a document stamped, wrapped or quoted, a
message sent and confirmed) holds the code's own text there: ``inside`` says where, and the
tokenizer reads only the rest and the edges (``codemode.privacy.quoted``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["SentTexts"]

# Texts from this length on are compared, not hashed (hashing a MB costs about a millisecond;
# telling two texts of the same length apart usually takes a few characters).
_COMPARED_FROM = 1024
# Long texts kept per length: beyond, a text is scanned as any other (many texts of one length
# would otherwise cost a comparison each for every result text of that length).
_LONG_KEPT = 16
# Texts looked for inside a longer result text: the longest few (each look is a pass over
# the result), of this many characters or more (a shorter one holds no value whole).
_INSIDE_KEPT = 8
_INSIDE_FROM = 8


class SentTexts:
    """``holds(text)``: did the call's arguments carry ``text``, character for character?
    Indexed on the first question: most results hold no text, and most calls send little."""

    def __init__(self, arguments: Any) -> None:
        self._arguments: Any = arguments
        self._indexed = False
        self._short: set[str] = set()
        self._short_lengths: set[int] = set()
        self._long: dict[int, list[str]] = {}
        self._longest: list[str] = []  # for ``inside``: longest first

    def holds(self, text: str) -> bool:
        if not self._indexed:
            self._index()
        size = len(text)
        if size < _COMPARED_FROM:
            return size in self._short_lengths and text in self._short
        return any(sent is text or sent == text for sent in self._long.get(size, ()))

    def inside(self, text: str) -> tuple[int, int] | None:
        """Where a sent text of ``_INSIDE_FROM`` characters or more lies whole inside
        ``text``, a longer text, as ``(start, end)``: the longest such of the call's
        ``_INSIDE_KEPT`` longest, at its first place. None where none does."""
        if not self._indexed:
            self._index()
        size = len(text)
        for sent in self._longest:
            if len(sent) < size:
                at = text.find(sent)
                if at >= 0:
                    return at, at + len(sent)
        return None

    def _index(self) -> None:
        self._indexed = True
        pending = [self._arguments]
        self._arguments = None
        while pending:
            value = pending.pop()
            if isinstance(value, str):
                if not value:
                    continue
                if len(value) < _COMPARED_FROM:
                    self._short.add(value)
                    self._short_lengths.add(len(value))
                else:
                    same_length = self._long.setdefault(len(value), [])
                    if len(same_length) < _LONG_KEPT:
                        same_length.append(value)
            elif isinstance(value, dict):
                pending.extend(value.values())
            elif isinstance(value, list | tuple):
                pending.extend(value)
        # The longest first (equal lengths in a fixed order: sets are not ordered).
        texts = [text for same in self._long.values() for text in same]
        texts += [text for text in self._short if len(text) >= _INSIDE_FROM]
        longest: list[str] = []
        for sent in sorted(texts, key=lambda text: (-len(text), text)):
            if len(longest) == _INSIDE_KEPT:
                break
            if not any(sent == kept for kept in longest):
                longest.append(sent)
        self._longest = longest

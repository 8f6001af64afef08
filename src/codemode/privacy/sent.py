"""The texts a call's arguments held as the code wrote them.

A result that hands one of them back unchanged (an echo, a record created and returned with the
fields sent, a document passed through) hands the code nothing it did not hold, so the
tokenizer returns it as it is: no scan, and no token minted for the code's own words as if the
tool had sent them (which would then count as that server's data for the flow rules). The
arguments are taken before tokens in them are put back: a text that held a token and returns
with the value in its place is not the code's own, and is tokenized as ever.
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


class SentTexts:
    """``holds(text)``: did the call's arguments carry ``text``, character for character?
    Indexed on the first question: most results hold no text, and most calls send little."""

    def __init__(self, arguments: Any) -> None:
        self._arguments: Any = arguments
        self._indexed = False
        self._short: set[str] = set()
        self._short_lengths: set[int] = set()
        self._long: dict[int, list[str]] = {}

    def holds(self, text: str) -> bool:
        if not self._indexed:
            self._index()
        size = len(text)
        if size < _COMPARED_FROM:
            return size in self._short_lengths and text in self._short
        return any(sent is text or sent == text for sent in self._long.get(size, ()))

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

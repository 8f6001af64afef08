"""The text the fast path scans, and the byte copies its anchors search (made once, on demand).

``ScanText.raw`` is a same-width ASCII copy: one byte per character (``0`` for any digit, a space
for any whitespace, ``?`` for other characters beyond ASCII but the few letters ``(?i)`` folds
to ASCII), so an offset in it is an offset in the text.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from codemode.privacy.native import NativeScanner

__all__ = ["ScanText", "Window"]

#: A span of text to search: ``(start, end)``.
Window = tuple[int, int]

# Characters that case-insensitive patterns match as ASCII letters (``re`` folds them so).
_FOLDS = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}


def _ascii_of(ch: str) -> str:
    if ch.isdecimal():
        return "0"
    if ch.isspace():
        return " "
    return _FOLDS.get(ch, "?")


def _same_width(error: UnicodeError) -> tuple[str, int]:
    """Encode error handler: one ASCII character per character: ``0`` for any digit, a space
    for any whitespace, the letter ``(?i)`` matches for the few letters it folds to ASCII."""
    assert isinstance(error, UnicodeEncodeError)
    chunk = error.object[error.start : error.end]
    return "".join(map(_ascii_of, chunk)), error.end


codecs.register_error("codemode-same-width", _same_width)

_DIGITS = bytes(48 if 48 <= i <= 57 else 46 for i in range(256))  # digit -> "0", else "."


@dataclass
class ScanText:
    """``text`` and the byte copies the anchors search, made once and only when needed."""

    text: str
    _raw: bytes | None = None
    _lower: bytes | None = None
    _digits: bytes | None = None
    clusters: list[tuple[int, int, int]] | None = None
    _native: list[list[int]] | None = None

    @property
    def raw(self) -> bytes:
        if self._raw is None:
            self._raw = self.text.encode("ascii", "codemode-same-width")
        return self._raw

    @property
    def lower(self) -> bytes:
        if self._lower is None:
            self._lower = self.raw.lower()
        return self._lower

    @property
    def digits(self) -> bytes:
        if self._digits is None:
            self._digits = self.raw.translate(_DIGITS)
        return self._digits

    def native_hits(self, scanner: NativeScanner) -> list[list[int]]:
        if self._native is None:
            self._native = scanner.hits(self.raw)
        return self._native

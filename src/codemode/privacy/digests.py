"""Content digests of long text, which key the caches that spare scanning it again."""

from __future__ import annotations

import hashlib

__all__ = ["TextDigests", "content_digest"]


def content_digest(text: str) -> bytes:
    """A hash of ``text`` to key caches of long text by (16 bytes of SHA-256: the CPU's own
    SHA instructions, where OpenSSL finds them, hash a MB in half the time BLAKE2b takes)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


class TextDigests:
    """The ``content_digest`` of the texts one tool call's arguments hold, for the call's result
    to reuse where it brings a text back unchanged (an echo, a document passed through):
    telling an equal text costs a comparison of its characters, hashing a MB 0.6 ms. It lives as
    long as the call and keeps at most ``KEPT`` texts (all the call's own), so that a result of
    many texts of one length costs a few comparisons each, not one per text before it."""

    KEPT = 8

    def __init__(self) -> None:
        self._by_length: dict[int, list[tuple[str, bytes]]] = {}
        self._kept = 0

    def of(self, text: str, *, keep: bool = True) -> bytes:
        """``text``'s digest; ``keep``: remember it for the texts asked for later."""
        same_length = self._by_length.get(len(text), ())
        for seen, digest in same_length:
            if seen is text or seen == text:
                return digest
        digest = content_digest(text)
        if keep and self._kept < self.KEPT:
            self._by_length.setdefault(len(text), []).append((text, digest))
            self._kept += 1
        return digest

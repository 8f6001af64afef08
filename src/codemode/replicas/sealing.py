"""Authenticated encryption of what codemode writes to the shared store.

A sealed value is ``0xC1 | key id | nonce (12 bytes) | AES-256-GCM ciphertext and tag``.
``0xC1`` is a byte msgpack never writes and JSON never starts with, so a sealed value is never
mistaken for a plain one. The key id is one byte derived from the key (no numbering to keep
in step across replicas); it picks the key among the current one and the old ones kept for
rotation. Every write draws a fresh random 96-bit nonce. The associated data is the Redis key
(and hash field) the value is written under, so a value copied to another key, another
session or another token fails its check.

``KeySealer`` does that; ``PlainSealer`` (no key configured) stores values as they are and
refuses a sealed one with a clear error. Neither ever returns data that failed its check.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from codemode.errors import SharedStoreDecryptError

__all__ = ["KEY_BYTES", "KeySealer", "PlainSealer", "Sealer", "StoreKey", "binding"]

log = logging.getLogger(__name__)

KEY_BYTES = 32
MAGIC = b"\xc1"
_NONCE_BYTES = 12
_HEADER = len(MAGIC) + 1 + _NONCE_BYTES
_CONTEXT = b"codemode shared store v1\x00"
_KEY_FIX = (
    "give every replica the same key (gateway.shared_store_key_file or "
    "CODEMODE_SHARED_STORE_KEY); after a rotation, keep the previous key in "
    "gateway.shared_store_old_key_files until the old values expired"
)


def binding(key: str, field_name: str | None = None) -> str:
    """What a value is bound to: its Redis key, and its field within a hash."""
    return key if field_name is None else f"{key}\x00{field_name}"


@dataclass(frozen=True)
class StoreKey:
    """A 32-byte key and where it came from (a file, or the environment), for messages."""

    material: bytes = field(repr=False)
    origin: str

    @property
    def key_id(self) -> int:
        return hashlib.sha256(b"codemode key id\x00" + self.material).digest()[0]


class Sealer:
    """Seal values before they are written and open them after they are read."""

    #: True when values are encrypted (a key is configured).
    encrypted = False

    def seal(self, data: bytes, *, bound_to: str) -> bytes:
        raise NotImplementedError

    def open(self, blob: bytes, *, bound_to: str) -> bytes:
        """The data ``seal`` was given for ``bound_to``; ``SharedStoreDecryptError`` when
        the value fails its check (logged, naming the key, never the data)."""
        raise NotImplementedError

    def stale(self, blob: bytes, *, bound_to: str) -> bool:
        """True when ``blob`` (sealed for ``bound_to``) should be written again: sealed with
        an old key."""
        return False

    def describe(self) -> str:
        raise NotImplementedError


def _refuse(bound_to: str, reason: str, fix: str) -> SharedStoreDecryptError:
    shown = bound_to.replace("\x00", " field ")
    log.error("shared store value %s refused: %s", shown, reason)
    return SharedStoreDecryptError(f"the shared store's value {shown} {reason}", fix=fix)


class PlainSealer(Sealer):
    """No key: values are written as they are (the gateway warns at start)."""

    def seal(self, data: bytes, *, bound_to: str) -> bytes:
        return data

    def open(self, blob: bytes, *, bound_to: str) -> bytes:
        if blob[:1] == MAGIC:
            raise _refuse(
                bound_to,
                "is encrypted, but this replica has no key",
                "set the key the other replicas use: gateway.shared_store_key_file or "
                "CODEMODE_SHARED_STORE_KEY",
            )
        return blob

    def describe(self) -> str:
        return "unencrypted (no key)"


class KeySealer(Sealer):
    """AES-256-GCM with ``current`` for writes; ``current`` and ``old`` keys for reads."""

    encrypted = True

    def __init__(self, current: StoreKey, old: Sequence[StoreKey] = ()) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.current = current
        self.keys = [current, *(key for key in old if key.material != current.material)]
        self._ciphers = [(key.key_id, AESGCM(key.material)) for key in self.keys]
        self._current = self._ciphers[0][1]

    def _associated(self, key_id: int, bound_to: str) -> bytes:
        return _CONTEXT + MAGIC + bytes([key_id]) + bound_to.encode()

    def seal(self, data: bytes, *, bound_to: str) -> bytes:
        key_id = self.current.key_id
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._current.encrypt(nonce, data, self._associated(key_id, bound_to))
        return MAGIC + bytes([key_id]) + nonce + sealed

    def open(self, blob: bytes, *, bound_to: str) -> bytes:
        from cryptography.exceptions import InvalidTag

        if blob[:1] != MAGIC or len(blob) < _HEADER + 16:
            raise _refuse(
                bound_to,
                "is not encrypted, though this replica has a key: it was written by a replica "
                "without the key, or planted; it was not used",
                "give every replica the key; values written without it expire with their "
                "sessions (or delete them)",
            )
        key_id = blob[1]
        nonce, sealed = blob[2:_HEADER], blob[_HEADER:]
        candidates = [cipher for ident, cipher in self._ciphers if ident == key_id]
        if not candidates:
            raise _refuse(
                bound_to,
                f"was encrypted with a key this replica does not have (key id {key_id:02x}; "
                f"this replica has {', '.join(f'{k.key_id:02x}' for k in self.keys)})",
                _KEY_FIX,
            )
        associated = self._associated(key_id, bound_to)
        for cipher in candidates:
            try:
                return cipher.decrypt(nonce, sealed, associated)
            except InvalidTag:
                continue
        raise _refuse(
            bound_to,
            "failed its integrity check: it was changed, copied from another key or session, "
            "or sealed with a different key that has the same key id; it was not used",
            "if it was not tampered with, " + _KEY_FIX,
        )

    def stale(self, blob: bytes, *, bound_to: str) -> bool:
        if blob[:1] != MAGIC or len(blob) < _HEADER + 16:
            return False
        key_id = blob[1]
        if key_id != self.current.key_id:
            return True
        if not any(ident == key_id for ident, _cipher in self._ciphers[1:]):
            return False
        # An old key with the current one's id (one rotation in 256): the id cannot tell
        # them apart, so the current key's check does.
        from cryptography.exceptions import InvalidTag

        try:
            self._current.decrypt(
                blob[2:_HEADER], blob[_HEADER:], self._associated(key_id, bound_to)
            )
        except InvalidTag:
            return True
        return False

    def describe(self) -> str:
        old = len(self.keys) - 1
        extra = f", and {old} old key(s) for reading" if old else ""
        return f"AES-256-GCM with key id {self.current.key_id:02x} ({self.current.origin}){extra}"

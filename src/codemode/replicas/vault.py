"""``SharedVault``: a session's vault written through to the shared store.

The replica running a session keeps the vault in memory, as a single gateway does, and writes
each new or changed entry to ``vault:{session}`` (a hash, token -> entry) and each reserved
token name to ``vault:{session}:reserved``. A replica that takes the session over loads both,
so tokens minted through one replica resolve through any other. Only the lease holder writes
(one replica runs a session at a time). ``wipe`` forgets the local copy only; the shared one is
deleted when the session ends for good (``vault_keys``), or expires when unused for ``ttl_s``.

Each entry (its value, kind, sources and token) is sealed by the store's ``Sealer``, bound to
the session's key and the token (see ``sealing``); an entry that fails its check fails the
session's load with ``SharedStoreDecryptError``, never a vault with a wrong value. Entries
sealed with an old key are written again with the current one when loaded. The reserved
token names are not sealed: they are only token-shaped text seen in tool data.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

import msgpack

from codemode.errors import SharedStoreDecryptError
from codemode.privacy.vault import TokenSource, Vault, VaultEntry, VaultValue
from codemode.replicas.connection import SharedRedis
from codemode.replicas.sealing import PlainSealer, Sealer, binding

__all__ = ["SharedVault", "vault_keys"]

_NUMBER = re.compile(r"_(\d+)>$")


def vault_keys(redis: SharedRedis, session: str) -> tuple[str, str]:
    return redis.key("vault", session), redis.key("vault", session, "reserved")


class SharedVault(Vault):
    def __init__(
        self, redis: SharedRedis, session: str, *, ttl_s: float, sealer: Sealer | None = None
    ) -> None:
        super().__init__()
        self.redis = redis
        self.session = session
        self.sealer = sealer or PlainSealer()
        self._ttl_ms = max(int(ttl_s * 1000), 1000)
        self._entries_key, self._reserved_key = vault_keys(redis, session)
        self._write_lock = threading.Lock()
        # What was last written per token: (origins, delivered, sources) counts.
        self._saved: dict[str, tuple[int, int, int]] = {}
        self._load()

    def _load(self) -> None:
        pipe = self.redis.client.pipeline(transaction=False)
        pipe.hgetall(self._entries_key)
        pipe.smembers(self._reserved_key)
        entries, reserved = self.redis.call(pipe.execute)
        stale: list[str] = []
        with self._lock:
            for field_name, sealed in entries.items():
                name = field_name.decode()
                try:
                    raw = self.sealer.open(sealed, bound_to=binding(self._entries_key, name))
                except SharedStoreDecryptError as error:
                    raise SharedStoreDecryptError(
                        f"session {self.session[:12]!r} cannot continue: {error.message}",
                        fix=error.fix,
                    ) from None
                kind, value, origins, delivered, sources, token = msgpack.unpackb(raw, raw=False)
                if self.sealer.stale(sealed, bound_to=binding(self._entries_key, name)):
                    stale.append(token)
                entry = VaultEntry(token, kind, value, frozenset(origins), frozenset(delivered))
                entry.sources = [TokenSource(*source) for source in sources]
                self._keep(entry)
                found = _NUMBER.search(token)
                if found:
                    number = int(found.group(1))
                    self._counters[kind] = max(self._counters.get(kind, 0), number)
                self._saved[token] = _counts(entry)
            self._reserved.update(item.decode() for item in reserved)
            if entries:
                self._version += 1
        for token in stale:  # sealed with an old key: now with the current one
            self._saved.pop(token, None)
            self._save(token)

    def token_for(self, kind: str, value: VaultValue, source: TokenSource) -> str:
        token = super().token_for(kind, value, source)
        self._save(token)
        return token

    def tokens_for(self, items: Iterable[tuple[str, VaultValue]], source: TokenSource) -> list[str]:
        tokens = super().tokens_for(items, source)
        for token in dict.fromkeys(tokens):  # each entry saved once, as token_for saves it
            self._save(token)
        return tokens

    def mark_delivered(self, token: str, server: str) -> None:
        super().mark_delivered(token, server)
        self._save(token)

    def reserve(self, token: str) -> None:
        if token in self._reserved:
            return
        super().reserve(token)
        pipe = self.redis.client.pipeline(transaction=False)
        pipe.sadd(self._reserved_key, token)
        pipe.pexpire(self._reserved_key, self._ttl_ms)
        self.redis.call(pipe.execute)

    def wipe(self) -> None:
        super().wipe()
        with self._write_lock:
            self._saved.clear()

    def _save(self, token: str) -> None:
        with self._write_lock:
            with self._lock:
                entry = self._by_token.get(token)
                if entry is None or self._saved.get(token) == _counts(entry):
                    return
                packed = self.sealer.seal(_pack(entry), bound_to=binding(self._entries_key, token))
                self._saved[token] = _counts(entry)
            pipe = self.redis.client.pipeline(transaction=False)
            pipe.hset(self._entries_key, token, packed)
            pipe.pexpire(self._entries_key, self._ttl_ms)
            self.redis.call(pipe.execute)


def _counts(entry: VaultEntry) -> tuple[int, int, int]:
    return len(entry.origins), len(entry.delivered), len(entry.seen_at)


def _pack(entry: VaultEntry) -> bytes:
    sources = [list(place) for place in entry.seen_at]
    data = [entry.kind, entry.value, sorted(entry.origins), sorted(entry.delivered), sources]
    packed: bytes = msgpack.packb([*data, entry.token], use_bin_type=True)
    return packed

"""``SealedStore``: a key-value store whose values are sealed (session checkpoints in the
shared store: a session's files and kept variables, which can hold anything its tools
returned). Each value is bound to its full Redis key (``namespace`` + key)."""

from __future__ import annotations

from codemode.errors import StateStoreError
from codemode.replicas.sealing import Sealer
from codemode.state.store import KeyValueStore, StoredValue

__all__ = ["SealedStore"]


class SealedStore:
    def __init__(self, store: KeyValueStore, sealer: Sealer, *, namespace: str) -> None:
        self.store = store
        self.sealer = sealer
        self.namespace = namespace

    def get(self, key: str) -> StoredValue | None:
        found = self.store.get(key)
        if found is None:
            return None
        data = self.sealer.open(found.data, bound_to=self.namespace + key)
        return StoredValue(data, found.expires_at)

    def set(self, key: str, data: bytes, *, expires_at: float | None = None) -> None:
        sealed = self.sealer.seal(data, bound_to=self.namespace + key)
        self.store.set(key, sealed, expires_at=expires_at)

    def delete(self, key: str) -> bool:
        return self.store.delete(key)

    def incr(self, key: str, by: int = 1) -> int:
        raise StateStoreError(
            "a sealed store holds no counters (a sealed value cannot be added to)",
            fix="keep counters in a plain store",
        )

    def delete_prefix(self, prefix: str) -> int:
        return self.store.delete_prefix(prefix)

    def close(self) -> None:
        self.store.close()

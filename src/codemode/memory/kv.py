"""``KVFixes``: the fix memory in the state store, so that replicas sharing it share the fixes.

Keys live under ``fix:``, a namespace guest code cannot reach: ``from state import kv`` only
ever writes under ``s:`` (a session), ``o:`` (an owner) and ``q:`` (their quotas)
(``codemode.state.tools``). Owners and signatures are escaped, so no two map to one key.

    fix:<owner>               the owner's signatures, least recently seen first (the index)
    fix:<owner>:<signature>   one fix: its diff, when it was recorded, how often it was used

Writers on several replicas replace the index last-writer-wins: a lost line leaves its fix
recallable but unlisted until the owner's memory is forgotten; nothing else is lost.
"""

from __future__ import annotations

import threading
import time

import msgpack

from codemode.memory.fixes import Fix
from codemode.state.quota import escape_key_part
from codemode.state.store import KeyValueStore

__all__ = ["FIX_PREFIX", "KVFixes"]

FIX_PREFIX = "fix:"


class KVFixes:
    """``FixMemory`` over a ``KeyValueStore``; the store is the caller's to close."""

    def __init__(self, store: KeyValueStore, *, per_owner: int = 200) -> None:
        self.store = store
        self.per_owner = per_owner
        self._lock = threading.Lock()

    @staticmethod
    def _index_key(owner: str) -> str:
        return FIX_PREFIX + escape_key_part(owner)

    def _key(self, owner: str, signature: str) -> str:
        return f"{self._index_key(owner)}:{escape_key_part(signature)}"

    def _index(self, owner: str) -> list[str]:
        found = self.store.get(self._index_key(owner))
        return [] if found is None else list(msgpack.unpackb(found.data, raw=False))

    def _save_index(self, owner: str, signatures: list[str]) -> None:
        if signatures:
            self.store.set(self._index_key(owner), msgpack.packb(signatures, use_bin_type=True))
        else:
            self.store.delete(self._index_key(owner))

    def _get(self, owner: str, signature: str) -> Fix | None:
        found = self.store.get(self._key(owner, signature))
        if found is None:
            return None
        diff, recorded, uses = msgpack.unpackb(found.data, raw=False)
        return Fix(owner, signature, diff, recorded, uses)

    def _put(self, fix: Fix) -> None:
        data = msgpack.packb([fix.diff, fix.recorded, fix.uses], use_bin_type=True)
        self.store.set(self._key(fix.owner, fix.signature), data)

    def _seen(self, owner: str, signature: str) -> None:
        """Move ``signature`` to the newest end of the index; evict past ``per_owner``."""
        index = [known for known in self._index(owner) if known != signature] + [signature]
        evicted, kept = index[: -self.per_owner], index[-self.per_owner :]
        for old in evicted:
            self.store.delete(self._key(owner, old))
        self._save_index(owner, kept)

    def remember(self, owner: str, signature: str, diff: str) -> None:
        with self._lock:
            self._put(Fix(owner, signature, diff, time.time()))
            self._seen(owner, signature)

    def restore(self, fix: Fix) -> bool:
        """Keep ``fix`` as it was recorded elsewhere (an older file), unless this owner already
        has a fix for its signature; True when it was added."""
        with self._lock:
            if self._get(fix.owner, fix.signature) is not None:
                return False
            self._put(fix)
            self._seen(fix.owner, fix.signature)
            return True

    def recall(self, owner: str, signature: str) -> Fix | None:
        with self._lock:
            found = self._get(owner, signature)
            if found is None:
                return None
            used = Fix(owner, signature, found.diff, found.recorded, found.uses + 1)
            self._put(used)
            self._seen(owner, signature)
            return used

    def entries(self, owner: str) -> list[Fix]:
        with self._lock:
            found = [self._get(owner, signature) for signature in self._index(owner)]
        return [fix for fix in found if fix is not None]

    def forget(self, owner: str, signature: str | None = None) -> int:
        with self._lock:
            index = self._index(owner)
            doomed = index if signature is None else [signature]
            # Counted by reading: a tiered store's delete answers for its short tier only.
            count = sum(self._get(owner, known) is not None for known in doomed)
            if signature is None:
                self.store.delete_prefix(self._index_key(owner) + ":")  # unlisted ones too
                self._save_index(owner, [])
            else:
                self.store.delete(self._key(owner, signature))
                self._save_index(owner, [known for known in index if known != signature])
            return count

    def close(self) -> None:
        return None

"""Quotas on what code keeps in the state store: bytes and keys, per session and per owner.

Usage is kept in counters beside the values (``q:s:<session>:`` and ``q:o:<owner>:``), updated
on every set, incr and delete. A value that expires is not subtracted, so a counter can only
overstate; before refusing a write the quota recounts the scope exactly when the store can
(``CountsUsage``), so expired values never block new ones.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from codemode.errors import ToolError
from codemode.settings.state import KvQuota
from codemode.state.store import KeyValueStore, StoredValue

__all__ = ["CountsUsage", "KvQuota", "QuotaScope", "escape_key_part"]


def escape_key_part(text: str) -> str:
    """``text`` as one part of a ``:``-separated key, so that no two names give the same key
    (``team`` + ``ops:x`` against ``team:ops`` + ``x``). Names without ``:`` or ``%`` are
    unchanged, so keys written before the escaping still match."""
    return text.replace("%", "%25").replace(":", "%3A")


@runtime_checkable
class CountsUsage(Protocol):
    def usage(self, prefix: str) -> tuple[int, int]:
        """(keys, bytes of keys and values) of the live keys starting with ``prefix``."""
        ...


@dataclass(frozen=True, slots=True)
class QuotaScope:
    """One scope's limits: its values start with ``prefix``, its counters with ``counters``."""

    label: str  # "this session", "this owner"
    prefix: str
    counters: str
    max_bytes: int
    max_keys: int
    # The [state] settings that raise the limits, for the messages.
    keys_setting: str
    bytes_setting: str
    # Counters expire with the scope's values (a session's); None for no expiry.
    ttl_s: float | None = None

    def charge(
        self, store: KeyValueStore, key: str, old: StoredValue | None, new_size: int
    ) -> tuple[int, int]:
        """Check that replacing ``old`` at ``key`` with ``new_size`` bytes fits; the change in
        (keys, bytes) to record once the write is done. Raises ``ToolError`` when over."""
        added_keys = 0 if old is not None else 1
        added_bytes = new_size - len(old.data) if old is not None else new_size + len(key.encode())
        keys, size = self._read(store)
        if self._over(keys, size, added_keys, added_bytes) and isinstance(store, CountsUsage):
            keys, size = store.usage(self.prefix)  # the counters include expired values
            self._write(store, keys, size)
        if added_keys and keys + added_keys > self.max_keys:
            raise ToolError(
                f"state: {self.label} already keeps {keys:,} keys, its quota "
                f"([state] {self.keys_setting})",
                fix="delete keys it no longer needs (kv.delete, shared.delete), or ask the "
                f"operator to raise [state] {self.keys_setting}",
            )
        if added_bytes > 0 and size + added_bytes > self.max_bytes:
            raise ToolError(
                f"state: {self.label} would keep {size + added_bytes:,} bytes, over its quota "
                f"of {self.max_bytes:,} ([state] {self.bytes_setting})",
                fix="delete values it no longer needs, keep large data in workspace files, or "
                f"ask the operator to raise [state] {self.bytes_setting}",
            )
        return added_keys, added_bytes

    def _over(self, keys: int, size: int, added_keys: int, added_bytes: int) -> bool:
        return (added_keys > 0 and keys + added_keys > self.max_keys) or (
            added_bytes > 0 and size + added_bytes > self.max_bytes
        )

    def record(self, store: KeyValueStore, keys: int, size: int) -> None:
        if keys:
            store.incr(self.counters + "keys", keys)
        if size:
            store.incr(self.counters + "bytes", size)
        if self.ttl_s is not None and (keys or size):
            self._write(store, *self._read(store))

    def _read(self, store: KeyValueStore) -> tuple[int, int]:
        def number(name: str) -> int:
            found = store.get(self.counters + name)
            try:
                return max(0, int(found.data)) if found is not None else 0
            except ValueError:
                return 0

        return number("keys"), number("bytes")

    def _write(self, store: KeyValueStore, keys: int, size: int) -> None:
        until = None if self.ttl_s is None else time.time() + self.ttl_s
        store.set(self.counters + "keys", str(keys).encode(), expires_at=until)
        store.set(self.counters + "bytes", str(size).encode(), expires_at=until)

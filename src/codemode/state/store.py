"""The key-value seam: a small Protocol and its in-memory twin.

Values are bytes (the caller serializes); every key may carry a time to live. ``incr`` is
atomic within one store. Implementations: ``MemoryStore`` (here), ``SQLiteStore`` (durable),
``RedisStore`` (a Redis-compatible server), ``TieredStore`` (a short tier over a durable one).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["KeyValueStore", "MemoryStore", "StoredValue"]


@dataclass(frozen=True, slots=True)
class StoredValue:
    data: bytes
    # Absolute expiry on the wall clock (time.time()), or None for no expiry.
    expires_at: float | None = None


class KeyValueStore(Protocol):
    def get(self, key: str) -> StoredValue | None: ...

    def set(self, key: str, data: bytes, *, expires_at: float | None = None) -> None: ...

    def delete(self, key: str) -> bool:
        """True when the key existed."""
        ...

    def incr(self, key: str, by: int = 1) -> int:
        """Add ``by`` to the integer at ``key`` (0 when missing) and return the new value."""
        ...

    def delete_prefix(self, prefix: str) -> int:
        """Delete every key starting with ``prefix``; returns how many."""
        ...

    def close(self) -> None: ...


class MemoryStore:
    """A dict with expiry. Thread-safe; ``clock`` is injectable for tests."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._values: dict[str, StoredValue] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def _live(self, key: str) -> StoredValue | None:
        value = self._values.get(key)
        if value is not None and value.expires_at is not None and value.expires_at <= self._clock():
            del self._values[key]
            return None
        return value

    def get(self, key: str) -> StoredValue | None:
        with self._lock:
            return self._live(key)

    def set(self, key: str, data: bytes, *, expires_at: float | None = None) -> None:
        with self._lock:
            self._values[key] = StoredValue(bytes(data), expires_at)

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._values.pop(key, None) is not None

    def incr(self, key: str, by: int = 1) -> int:
        with self._lock:
            current = self._live(key)
            number = int(current.data) + by if current is not None else by
            expires = current.expires_at if current is not None else None
            self._values[key] = StoredValue(str(number).encode(), expires)
            return number

    def delete_prefix(self, prefix: str) -> int:
        with self._lock:
            doomed = [key for key in self._values if key.startswith(prefix)]
            for key in doomed:
                del self._values[key]
            return len(doomed)

    def usage(self, prefix: str) -> tuple[int, int]:
        """(keys, bytes of keys and values) of the live keys under ``prefix``."""
        with self._lock:
            keys = [key for key in list(self._values) if key.startswith(prefix)]
            live = [(key, value) for key in keys if (value := self._live(key)) is not None]
            return len(live), sum(len(key.encode()) + len(value.data) for key, value in live)

    def close(self) -> None:
        return None

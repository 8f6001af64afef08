"""``TieredStore``: reads from a short-term tier, writes through to a durable one, asynchronously.

A write is acknowledged once the short tier has it; a background thread then copies it to the
durable tier, in order. A read that misses the short tier (a restart, an eviction, a Redis that
was replaced) falls back to the durable tier and refills the short one. ``flush`` waits until
every acknowledged write is durable; ``close`` flushes first. If the short tier fails, the
error reaches the caller and the durable tier still holds everything acknowledged before.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from codemode.state.store import KeyValueStore, StoredValue

__all__ = ["TieredStore"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Write:
    apply: Callable[[KeyValueStore], object]
    done: threading.Event | None = None


class TieredStore:
    def __init__(self, short: KeyValueStore, durable: KeyValueStore) -> None:
        self.short = short
        self.durable = durable
        self._queue: queue.Queue[_Write | None] = queue.Queue()
        self._writer = threading.Thread(target=self._write_loop, name="codemode-state-writer")
        self._writer.daemon = True
        self._writer.start()
        self._closed = False

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                item.apply(self.durable)
            except Exception:  # one bad write must not stop the others
                log.exception("a durable state write failed")
            finally:
                if item.done is not None:
                    item.done.set()

    def _later(self, apply: Callable[[KeyValueStore], object]) -> None:
        self._queue.put(_Write(apply))

    def get(self, key: str) -> StoredValue | None:
        value = self.short.get(key)
        if value is not None:
            return value
        self.flush()  # a write of this key may still be on its way to the durable tier
        value = self.durable.get(key)
        if value is not None:
            self.short.set(key, value.data, expires_at=value.expires_at)
        return value

    def set(self, key: str, data: bytes, *, expires_at: float | None = None) -> None:
        self.short.set(key, data, expires_at=expires_at)
        self._later(lambda store: store.set(key, data, expires_at=expires_at))

    def delete(self, key: str) -> bool:
        existed = self.short.delete(key)
        self._later(lambda store: store.delete(key))
        return existed

    def incr(self, key: str, by: int = 1) -> int:
        if self.short.get(key) is None:
            self.get(key)  # load the durable count first, or it restarts at zero
        number = self.short.incr(key, by)
        current = self.short.get(key)
        expires = current.expires_at if current is not None else None
        data = str(number).encode()
        self._later(lambda store: store.set(key, data, expires_at=expires))
        return number

    def delete_prefix(self, prefix: str) -> int:
        count = self.short.delete_prefix(prefix)
        self._later(lambda store: store.delete_prefix(prefix))
        return count

    def usage(self, prefix: str) -> tuple[int, int]:
        """From the durable tier, which holds every value (the short one may have evicted
        some): after a flush, so every acknowledged write counts."""
        from codemode.state.quota import CountsUsage

        self.flush()
        if isinstance(self.durable, CountsUsage):
            return self.durable.usage(prefix)
        if isinstance(self.short, CountsUsage):
            return self.short.usage(prefix)
        from codemode.errors import StateStoreError

        raise StateStoreError(
            "neither state tier can count its usage, so a quota cannot be checked",
            fix="use the built-in stores (memory or Redis over SQLite)",
        )

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every write acknowledged so far is in the durable tier."""
        if self._closed:
            return True
        done = threading.Event()
        self._queue.put(_Write(lambda store: None, done))
        return done.wait(timeout_s)

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._queue.put(None)
        self._writer.join(timeout=10)
        self.short.close()
        self.durable.close()

"""Audit events written by a thread of their own, many to a transaction, off the call's path.

Writing one event is a transaction of its own: 35-45 us of CPU with SQLite (its journal, its
locks, a check that the file is still the one opened), paid by every tool call before its
result went back to the code. That was a third of what a call through the chain cost when code
calls a tool in a loop (about 90 of 310 us, measured with `benchmarks/engine.py`'s E5). Here
``append`` only queues the event; a writer thread waits ``linger_s`` for more and writes them
together (``append_many`` where the store has it), and ``sync`` writes what still waits on its
caller's thread.

What is not lost: ``sync()`` returns once everything appended before it is stored, and every
execution calls it before its result goes back, so an agent never sees the result of a call
whose event is not in the log yet; ``query`` and ``close`` sync first. What can be: if the
process dies outright (killed, out of memory), the events of the last ``linger_s`` of the
execution then running, whose result nobody saw. A call that is under way when the process
dies was never written either way (its event records its outcome).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from codemode.audit.events import AuditEvent, AuditFilter
from codemode.audit.log import AppendsMany, AuditLog, report_unwritten
from codemode.cpus import take_process_cpus
from codemode.errors import StateStoreError

__all__ = ["BatchedAuditLog"]

log = logging.getLogger(__name__)

#: How long the writer waits for more events before it writes what it has.
LINGER_S = 0.002
#: Events written in one transaction at most.
MAX_BATCH = 256
#: Events waiting at most: an ``append`` beyond waits for the writer (a store that stalls
#: must not grow the gateway's memory without end).
MAX_PENDING = 4096
#: How long ``sync`` waits for the writer before it gives up (and says so in the log).
SYNC_TIMEOUT_S = 30.0


class BatchedAuditLog:
    """An ``AuditLog`` that queues each event for ``inner`` and writes them in batches."""

    def __init__(
        self,
        inner: AuditLog,
        *,
        linger_s: float = LINGER_S,
        max_batch: int = MAX_BATCH,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self.inner = inner
        # Asked once: ``isinstance`` against a runtime-checkable Protocol lists its members
        # each time (20-30 us here), with the GIL held, once per batch.
        self._many: AppendsMany | None = inner if isinstance(inner, AppendsMany) else None
        self.linger_s = linger_s
        self.max_batch = max(max_batch, 1)
        self.max_pending = max(max_pending, self.max_batch)
        self.failed_writes = 0
        self._pending: list[AuditEvent] = []
        self._appended = 0  # events ever queued
        self._stored = 0  # of those, written (or given up on)
        self._closed = False
        self._changed = threading.Condition(threading.Lock())
        self._writing = threading.Lock()  # held while a batch is taken and stored
        self._writer: threading.Thread | None = None

    @property
    def pending(self) -> int:
        """Events queued and not written yet."""
        return self._appended - self._stored

    def append(self, event: AuditEvent) -> None:
        with self._changed:
            if self._closed:
                raise StateStoreError("the audit log is closed", fix="append before closing it")
            while len(self._pending) >= self.max_pending:
                self._changed.wait(1.0)
                if self._closed:  # closed while this append waited for room
                    raise StateStoreError("the audit log is closed", fix="append before closing it")
            self._pending.append(event)
            self._appended += 1
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_loop, name="codemode-audit-writer", daemon=True
                )
                self._writer.start()
            # The writer is woken for the first event and for a full batch only: while it
            # lingers, a wake-up per event would cost what writing off the call's path saves.
            if len(self._pending) == 1 or len(self._pending) >= self.max_batch:
                self._changed.notify_all()

    def sync(self, timeout_s: float = SYNC_TIMEOUT_S) -> bool:
        """Return once every event appended so far is stored: what still waits is written
        on this thread (a hand-over to the writer and back would cost two wake-ups, more than
        the write of one event). False if the store did not take them within ``timeout_s``."""
        if self._appended == self._stored:  # nothing waits: no lock taken
            return True
        target = self._appended
        if not self._writing.acquire(timeout=timeout_s):  # the writer's batch goes first
            log.warning(
                "the audit log did not store %d events within %.0f s",
                target - self._stored,
                timeout_s,
            )
            return False
        try:
            # What was appended before this call: all of it waits in the queue now (a batch
            # is taken only with ``_writing`` held).
            while self._stored < target and self._write_next():
                pass
        finally:
            self._writing.release()
        return True

    def query(self, filters: AuditFilter | None = None) -> list[AuditEvent]:
        self.sync()
        return self.inner.query(filters)

    def close(self) -> None:
        """Store what is queued, stop the writer, close ``inner``. Idempotent."""
        self.sync()
        with self._changed:
            already, self._closed = self._closed, True
            writer = self._writer
            self._changed.notify_all()
        if writer is not None:
            writer.join(SYNC_TIMEOUT_S)
        if not already:
            self.inner.close()

    def _write_loop(self) -> None:
        take_process_cpus()  # started by whichever thread appended first, maybe a pinned one
        while True:
            with self._changed:
                while not self._pending and not self._closed:
                    self._changed.wait()
                if not self._pending:  # closed and drained
                    return
                # Linger for more, unless the batch is full or the log is closing.
                deadline = time.monotonic() + self.linger_s
                while (
                    not self._closed
                    and 0 < len(self._pending) < self.max_batch
                    and (remaining := deadline - time.monotonic()) > 0
                ):
                    self._changed.wait(remaining)
            with self._writing:
                self._write_next()

    def _write_next(self) -> int:
        """Take up to ``max_batch`` waiting events and store them (``_writing`` held: batches
        are stored in the order they were taken); how many it took."""
        with self._changed:
            batch = self._pending[: self.max_batch]
            del self._pending[: self.max_batch]
            self._changed.notify_all()  # room for appends that wait
        if batch:
            self._store(batch)
            with self._changed:
                self._stored += len(batch)
        return len(batch)

    def _store(self, batch: Sequence[AuditEvent]) -> None:
        if self._many is not None and len(batch) > 1:
            try:
                self._many.append_many(batch)
                return
            except Exception:  # noqa: BLE001 - written one by one below, each failure counted
                log.debug("a batch of audit events failed; writing them one by one")
        for event in batch:
            try:
                self.inner.append(event)
            except Exception as error:  # noqa: BLE001 - auditing must not stop the gateway
                self.failed_writes += 1
                report_unwritten(event, error)

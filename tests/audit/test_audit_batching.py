"""Audit events written off the call's path: in order, in batches, none lost, none returned
before they are stored."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from codemode.audit import AuditEvent, AuditFilter, MemoryAuditLog, SQLiteAuditLog
from codemode.audit.batching import BatchedAuditLog
from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.errors import StateStoreError
from codemode.sandbox import Limits, SandboxSettings


def event(i: int, session: str = "s1") -> AuditEvent:
    return AuditEvent(float(i), session, "crm", "get", f"sha256:{i:064x}", "allow", 1.0, "ok")


class RecordingLog(MemoryAuditLog):
    """The in-memory twin, slowed down, counting the batches it was handed."""

    def __init__(self, delay_s: float = 0.0) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.batches: list[int] = []
        self.writers: list[int] = []  # the thread that stored each batch
        self.closed = False
        self.gate = threading.Event()
        self.gate.set()

    def append(self, event: AuditEvent) -> None:
        self.append_many([event])

    def append_many(self, events: Sequence[AuditEvent]) -> None:
        self.gate.wait(10)
        time.sleep(self.delay_s)
        self.batches.append(len(events))
        self.writers.append(threading.get_ident())
        for one in events:
            super().append(one)

    def close(self) -> None:
        self.closed = True


def stored(log: RecordingLog) -> list[AuditEvent]:
    return MemoryAuditLog.query(log, AuditFilter(limit=None))


def test_every_event_is_stored_in_order_and_many_to_a_batch():
    inner = RecordingLog()
    batched = BatchedAuditLog(inner, linger_s=0.05, max_batch=64)
    events = [event(i) for i in range(200)]
    for one in events:
        batched.append(one)
    assert batched.sync()
    assert stored(inner) == events
    assert batched.pending == 0
    assert max(inner.batches) <= 64
    assert len(inner.batches) < 20  # one transaction per event would be 200
    batched.close()


def test_sync_returns_only_once_what_came_before_is_stored():
    inner = RecordingLog(delay_s=0.05)
    # Sync must not wait for the linger. A linger far above the bound below tells the two
    # apart on a loaded machine too (the write itself takes 0.05 s; with a linger of 1 s the
    # bound was 0.9 s).
    batched = BatchedAuditLog(inner, linger_s=60.0)
    for i in range(5):
        batched.append(event(i))
    started = time.monotonic()
    assert batched.sync()
    assert time.monotonic() - started < 10
    assert [one.time for one in stored(inner)] == [0.0, 1.0, 2.0, 3.0, 4.0]
    batched.close()


def test_sync_stores_what_waits_on_its_own_thread_not_through_the_writer():
    inner = RecordingLog()
    batched = BatchedAuditLog(inner, linger_s=5.0)
    batched.append(event(1))
    assert batched.sync()
    assert inner.writers == [threading.get_ident()]  # no hand-over to the writer and back
    batched.close()


def test_threads_appending_at_once_lose_nothing_and_keep_their_own_order():
    inner = RecordingLog()
    batched = BatchedAuditLog(inner, max_batch=16)

    def append_all(session: str) -> None:
        for i in range(300):
            batched.append(event(i, session))
            if random.random() < 0.05:
                time.sleep(0.001)

    threads = [threading.Thread(target=append_all, args=(f"s{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert batched.sync()
    everything = stored(inner)
    assert len(everything) == 1200
    for n in range(4):
        assert [one.time for one in everything if one.session == f"s{n}"] == [
            float(i) for i in range(300)
        ]
    batched.close()


def test_query_sees_what_was_just_appended():
    inner = RecordingLog()
    batched = BatchedAuditLog(inner, linger_s=5.0)
    batched.append(event(1))
    assert [one.time for one in batched.query(AuditFilter(session="s1"))] == [1.0]
    batched.close()


def test_close_stores_what_waits_closes_the_store_and_refuses_more():
    inner = RecordingLog()
    batched = BatchedAuditLog(inner, linger_s=5.0)
    for i in range(3):
        batched.append(event(i))
    batched.close()
    assert len(stored(inner)) == 3 and inner.closed
    with pytest.raises(StateStoreError, match="closed"):
        batched.append(event(9))
    batched.close()  # again: nothing happens


def test_a_store_that_stalls_holds_appends_back_instead_of_queueing_without_end():
    inner = RecordingLog()
    inner.gate.clear()
    batched = BatchedAuditLog(inner, linger_s=0.0, max_batch=4, max_pending=8)
    appended = 0

    def append_many_events() -> None:
        nonlocal appended
        for i in range(40):
            batched.append(event(i))
            appended += 1

    writer = threading.Thread(target=append_many_events)
    writer.start()
    time.sleep(0.3)
    assert appended <= 4 + 8  # one batch taken by the stalled store, a full queue behind it
    inner.gate.set()
    writer.join(10)
    assert appended == 40
    assert batched.sync()
    assert len(stored(inner)) == 40
    batched.close()


class FlakyLog(RecordingLog):
    """Refuses batches, and the event of one session."""

    def append_many(self, events: Sequence[AuditEvent]) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    def append(self, event: AuditEvent) -> None:
        if event.session == "bad":
            raise sqlite3.OperationalError("disk I/O error")
        MemoryAuditLog.append(self, event)


def test_a_failing_batch_is_written_one_by_one_and_each_failure_counted():
    inner = FlakyLog()
    batched = BatchedAuditLog(inner, linger_s=0.05)
    for i in range(3):
        batched.append(event(i))
    batched.append(event(3, "bad"))
    batched.append(event(4))
    assert batched.sync()
    assert [one.time for one in stored(inner)] == [0.0, 1.0, 2.0, 4.0]
    assert batched.failed_writes == 1
    batched.close()


def test_sqlite_writes_a_batch_in_one_transaction_all_or_nothing(tmp_path: Path):
    log = SQLiteAuditLog(tmp_path / "audit.sqlite")
    log.append_many([event(1), event(2)])
    broken = AuditEvent(3.0, None, "crm", "get", "x", "allow", 1.0, "ok")  # type: ignore[arg-type]
    with pytest.raises(sqlite3.IntegrityError):
        log.append_many([event(3), broken, event(4)])
    assert [one.time for one in log.query()] == [1.0, 2.0]
    log.close()


def crm_tools() -> list[object]:
    def get_customer(customer_id: str) -> dict[str, str]:
        """Get a customer."""
        return {"id": customer_id}

    return [get_customer]


@pytest.mark.anyio
async def test_an_execution_returns_only_once_its_calls_are_in_the_audit_log():
    inner = RecordingLog(delay_s=0.2)  # a slow store: its writes end after the code did
    batched = BatchedAuditLog(inner, linger_s=1.0)
    config = CodemodeConfig(
        servers={}, sandbox=SandboxSettings(limits=Limits(wall_time_s=20), pool_size=1)
    )
    catalog = Catalog([PythonConnector("crm", crm_tools())])
    async with Codemode(config, catalog=catalog, semantic=False, audit_log=batched) as engine:
        code = "from servers import crm\nfor i in range(5):\n    crm.get_customer(customer_id=str(i))\n"
        result = await engine.execute(code)
        assert result.status == "ok", result.render_text()
        calls = [one for one in stored(inner) if one.tool == "get_customer"]
        assert len(calls) == 5 and all(one.outcome == "ok" for one in calls)

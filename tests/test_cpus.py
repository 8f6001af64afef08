"""Threads a pinned thread starts for a pool take the process's CPUs, not its one CPU."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from codemode.audit import AuditEvent, MemoryAuditLog
from codemode.audit.batching import BatchedAuditLog
from codemode.cpus import process_cpus
from codemode.engine.invoker import _blocking_pool

T = TypeVar("T")
PROCESS = frozenset(os.sched_getaffinity(os.getpid()))


def from_a_pinned_thread(work: Callable[[], T]) -> T:
    """``work()`` on a thread pinned to one CPU (the way the bridge thread of a chatty
    execution is), and its result."""
    box: list[T] = []

    def pinned() -> None:
        os.sched_setaffinity(0, {min(PROCESS)})
        box.append(work())

    thread = threading.Thread(target=pinned)
    thread.start()
    thread.join(30)
    return box[0]


def test_the_process_cpus_are_the_main_threads():
    assert process_cpus() == PROCESS
    assert from_a_pinned_thread(process_cpus) == PROCESS  # asked from a pinned thread too


def test_a_tool_thread_started_by_a_pinned_thread_takes_every_cpu():
    pool = _blocking_pool.__wrapped__()  # a pool of its own, its threads not started yet
    try:
        seen = from_a_pinned_thread(
            lambda: pool.submit(lambda: frozenset(os.sched_getaffinity(0))).result(30)
        )
        assert seen == PROCESS
    finally:
        pool.shutdown()


class AffinityLog(MemoryAuditLog):
    def __init__(self) -> None:
        super().__init__()
        self.cpus: list[frozenset[int]] = []

    def append(self, event: AuditEvent) -> None:
        self.cpus.append(frozenset(os.sched_getaffinity(0)))
        super().append(event)


def test_the_audit_writer_started_by_a_pinned_thread_takes_every_cpu():
    inner = AffinityLog()
    batched = BatchedAuditLog(inner, linger_s=0.05)
    event = AuditEvent(1.0, "s", "crm", "get", "sha256:00", "allow", 1.0, "ok")

    def append_twice() -> None:  # the first append starts the writer, on this thread
        batched.append(event)
        batched.append(event)

    from_a_pinned_thread(append_twice)
    deadline = time.monotonic() + 10
    while not inner.cpus and time.monotonic() < deadline:  # the writer's batch, not a sync's
        time.sleep(0.01)
    assert inner.cpus and set(inner.cpus) == {PROCESS}
    batched.close()


def test_an_execution_thread_started_by_a_pinned_thread_takes_every_cpu():
    from codemode.engine.cpu_handoff import NoHandoff
    from codemode.engine.threads import WorkerThreads

    async def on_a_worker() -> frozenset[int]:
        workers = WorkerThreads(1, handoff=NoHandoff())  # no move, so no restore either
        try:
            return await workers.run(lambda: frozenset(os.sched_getaffinity(0)))
        finally:
            workers.close()

    assert from_a_pinned_thread(lambda: asyncio.run(on_a_worker())) == PROCESS

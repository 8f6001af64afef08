"""The engine's worker threads: results, errors, context, the bound, idle exit."""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Collection

import anyio
import pytest

from codemode.engine.threads import WorkerThreads

pytestmark = pytest.mark.anyio

request: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")


async def test_returns_the_result_and_runs_off_the_loop_thread():
    workers = WorkerThreads(2)
    loop_thread = threading.get_ident()
    assert await workers.run(threading.get_ident) != loop_thread
    assert await workers.run(lambda: 6 * 7) == 42
    workers.close()


async def test_an_exception_reaches_the_caller():
    workers = WorkerThreads(1)

    def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await workers.run(fail)
    assert await workers.run(lambda: "still serving") == "still serving"
    workers.close()


async def test_the_callers_context_variables_are_seen():
    workers = WorkerThreads(1)
    request.set("r-1")
    assert await workers.run(request.get) == "r-1"
    workers.close()


async def test_never_more_threads_than_the_limit_and_the_rest_wait():
    workers = WorkerThreads(2)
    release = threading.Event()
    running = 0
    most = 0
    lock = threading.Lock()

    def job() -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(10)
        with lock:
            running -= 1
        return 1

    futures = [workers.submit(job) for _ in range(5)]
    with anyio.fail_after(10):
        while running < 2:
            await anyio.sleep(0.01)
    assert workers.threads == 2 and running == 2
    release.set()
    with anyio.fail_after(10):
        assert [await future for future in futures] == [1] * 5
    assert most == 2
    workers.close()


async def test_a_free_thread_is_reused():
    workers = WorkerThreads(4)
    first = await workers.run(threading.get_ident)
    for _ in range(5):
        assert await workers.run(threading.get_ident) == first
    assert workers.threads == 1
    workers.close()


async def test_idle_threads_exit_and_new_work_starts_one_again():
    workers = WorkerThreads(2, idle_s=0.05)
    await workers.run(lambda: None)
    with anyio.fail_after(10):
        while workers.threads:
            await anyio.sleep(0.01)
    assert await workers.run(lambda: "back") == "back"
    workers.close()


async def test_close_stops_idle_threads_and_refuses_new_work():
    workers = WorkerThreads(2)
    await workers.run(lambda: None)
    workers.close()
    with anyio.fail_after(10):
        while workers.threads:
            await anyio.sleep(0.01)
    with pytest.raises(RuntimeError, match="closed"):
        workers.submit(lambda: None)


async def test_waiting_jobs_run_in_the_order_they_came():
    workers = WorkerThreads(1)
    release = threading.Event()
    order: list[int] = []
    blocker = workers.submit(lambda: release.wait(10))
    futures = [workers.submit(lambda i=i: order.append(i)) for i in range(5)]
    release.set()
    with anyio.fail_after(10):
        assert await blocker
        for future in futures:
            await future
    assert order == [0, 1, 2, 3, 4]
    workers.close()


async def test_jobs_waiting_at_close_still_run():
    workers = WorkerThreads(1)
    release = threading.Event()
    blocker = workers.submit(lambda: release.wait(10))
    waiting = workers.submit(lambda: "ran")
    workers.close()
    release.set()
    with anyio.fail_after(10):
        assert await blocker
        assert await waiting == "ran"
        while workers.threads:
            await anyio.sleep(0.01)


class RecordingHandoff:
    """A twin hand-over: records who moved which thread, and who restored."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def move_to_caller(self, native_id: int, allowed: Collection[int]) -> bool:
        assert allowed == frozenset(os.sched_getaffinity(0))
        self.events.append(("move", native_id))
        return True

    def restore(self, allowed: Collection[int]) -> None:
        self.events.append(("restore", threading.get_native_id()))


async def test_an_idle_worker_is_moved_by_the_caller_and_restores_itself_before_the_job():
    handoff = RecordingHandoff()
    workers = WorkerThreads(2, handoff=handoff)
    worker = await workers.run(threading.get_native_id)  # a new thread: nothing to move
    assert handoff.events == []
    for _ in range(3):
        seen = await workers.run(lambda: list(handoff.events))
        assert seen[-2:] == [("move", worker), ("restore", worker)]  # restored before it ran
    assert handoff.events == [("move", worker), ("restore", worker)] * 3
    workers.close()


async def test_nothing_is_restored_when_nothing_was_moved():
    handoff = RecordingHandoff()
    handoff.move_to_caller = lambda native_id, allowed: False  # type: ignore[method-assign]
    workers = WorkerThreads(1, handoff=handoff)
    for _ in range(3):
        await workers.run(lambda: None)
    assert handoff.events == []
    workers.close()

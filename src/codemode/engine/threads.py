"""Worker threads for blocking executions, each job handed to one waiting thread directly.

An execution blocks its thread while the sandbox runs the code, so the engine runs it on a
worker thread. A general-purpose hop (``anyio.to_thread.run_sync`` in a task) cost about
100 us of CPU and two to three times that in wall time on a loaded 2-core machine, more than
the warm execution itself. Here a job goes straight to the idle thread that finished last
(its caches are warm), moved first to the caller's CPU (``cpu_handoff``): one lock released,
no queue that every idle thread sleeps on. At most ``limit`` jobs run at once (the others
wait in order); a thread idle for ``idle_s`` seconds exits.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from codemode.cpus import process_cpus, take_process_cpus
from codemode.engine.cpu_handoff import CALLER_CPU, CpuHandoff

__all__ = ["WorkerThreads"]

T = TypeVar("T")

_Job = tuple[contextvars.Context, Callable[[], Any], asyncio.Future[Any]]


class _Idle:
    """A worker between jobs: it sleeps on ``wake`` until a job (or None: exit) is set."""

    def __init__(self) -> None:
        self.native_id = threading.get_native_id()
        self.allowed = process_cpus() or frozenset()
        self.wake = threading.Lock()
        self.wake.acquire()
        self.job: _Job | None = None
        self.moved = False


class WorkerThreads:
    def __init__(
        self,
        limit: int,
        *,
        idle_s: float = 30.0,
        name: str = "codemode-exec",
        handoff: CpuHandoff = CALLER_CPU,
    ) -> None:
        self.limit = max(limit, 1)
        self.idle_s = idle_s
        self.name = name
        self._handoff = handoff
        self._lock = threading.Lock()
        self._idle: list[_Idle] = []  # the last to finish is taken first
        self._pending: collections.deque[_Job] = collections.deque()
        self._threads = 0
        self._closed = False

    @property
    def threads(self) -> int:
        """Worker threads alive now (busy or idle)."""
        with self._lock:
            return self._threads

    def submit(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Run ``fn()`` on a worker thread (with a copy of the caller's context variables);
        the future, of the running loop, gets its result or exception."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        job: _Job = (contextvars.copy_context(), fn, future)
        with self._lock:
            if self._closed:
                raise RuntimeError("these worker threads are closed")
            if self._idle:
                worker = self._idle.pop()
                worker.job = job
                worker.moved = self._handoff.move_to_caller(worker.native_id, worker.allowed)
                worker.wake.release()
            elif self._threads < self.limit:
                self._threads += 1
                threading.Thread(
                    target=self._work, args=(job,), name=self.name, daemon=True
                ).start()
            else:
                self._pending.append(job)
        return future

    async def run(self, fn: Callable[[], T]) -> T:
        return await self.submit(fn)

    def close(self) -> None:
        """Let every idle thread exit; a running job, and the jobs waiting, finish first.
        Idempotent."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.job = None
            worker.wake.release()

    def _work(self, first: _Job) -> None:
        take_process_cpus()  # started by the caller's thread, which may be pinned
        me = _Idle()
        job: _Job | None = first
        while job is not None:
            context, fn, future = job
            del job  # the result must not live on in an idle thread
            try:
                value, error = context.run(fn), None
            except BaseException as failure:  # noqa: BLE001 (handed to the awaiting task)
                value, error = None, failure
            with self._lock:
                # Idle from the moment it can take a job (before this one's answer is handed
                # back), so a caller that submits again at once reuses this thread.
                job = self._pending.popleft() if self._pending else None
                if job is None and not self._closed:
                    self._idle.append(me)
            _settle(future, value, error)
            del context, fn, future, value, error
            if job is None and not self._closed:
                job = self._next(me)
        with self._lock:
            self._threads -= 1

    def _next(self, me: _Idle) -> _Job | None:
        """Sleep until a job is handed over: None when idle too long or closed."""
        if not me.wake.acquire(timeout=self.idle_s):
            with self._lock:
                if me in self._idle:
                    self._idle.remove(me)
                    return None
            me.wake.acquire()  # handed a job as the wait ran out: its release is due
        job, me.job = me.job, None
        if me.moved:
            self._handoff.restore(me.allowed)
            me.moved = False
        return job


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    def settle() -> None:
        if future.done():  # cancelled meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting
        future.get_loop().call_soon_threadsafe(settle)

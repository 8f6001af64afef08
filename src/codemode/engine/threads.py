"""Worker threads for blocking executions, handed work with one queue put and no more.

An execution blocks its thread while the sandbox runs the code, so the engine runs it on a
worker thread. A general-purpose hop (``anyio.to_thread.run_sync`` in a task) cost about
100 us of CPU and two to three times that in wall time on a loaded 2-core machine, more than
the warm execution itself; this pool costs about 40 us. At most ``limit`` jobs run at once
(the others wait in the queue); a thread idle for ``idle_s`` seconds exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["WorkerThreads"]

T = TypeVar("T")

_Job = tuple[contextvars.Context, Callable[[], Any], asyncio.Future[Any]] | None


class WorkerThreads:
    def __init__(self, limit: int, *, idle_s: float = 30.0, name: str = "codemode-exec") -> None:
        self.limit = max(limit, 1)
        self.idle_s = idle_s
        self.name = name
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._queued = 0
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
        with self._lock:
            if self._closed:
                raise RuntimeError("these worker threads are closed")
            self._jobs.put((contextvars.copy_context(), fn, future))
            self._queued += 1
            if self._queued > self._idle and self._threads < self.limit:
                self._threads += 1
                self._idle += 1
                threading.Thread(target=self._work, name=self.name, daemon=True).start()
        return future

    async def run(self, fn: Callable[[], T]) -> T:
        return await self.submit(fn)

    def close(self) -> None:
        """Let every idle thread exit; a running job finishes first. Idempotent."""
        with self._lock:
            self._closed = True
            for _ in range(self._threads):
                self._jobs.put(None)

    def _work(self) -> None:
        # Counted idle from the moment it can take a job (before its last one is handed
        # back), so a caller that submits again at once reuses this thread.
        while True:
            try:
                job = self._jobs.get(timeout=self.idle_s)
            except queue.Empty:
                with self._lock:
                    if self._jobs.empty():
                        self._idle -= 1
                        self._threads -= 1
                        return
                continue
            with self._lock:
                self._idle -= 1
                if job is None:
                    self._threads -= 1
                    return
                self._queued -= 1
            context, fn, future = job
            del job  # the result must not live on in an idle thread
            try:
                value, error = context.run(fn), None
            except BaseException as failure:  # noqa: BLE001 (handed to the awaiting task)
                value, error = None, failure
            with self._lock:
                self._idle += 1
            _settle(future, value, error)
            del context, fn, future, value, error


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

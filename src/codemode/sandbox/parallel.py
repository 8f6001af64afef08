"""Awaitable tool calls of one execution, answered on worker threads.

The guest marks a call sent by an awaitable form (``await tool.aio(...)``) with ``"async"``;
the execution loop hands such calls here instead of answering them in turn. Each runs
``BridgeHost.handle`` (grant and late-frame checks unchanged) on a worker, in the execution
loop's context (so a cancel reaches it); its reply is queued and the loop woken through a
socket pair, so every write to the bridge stays on the loop's thread. The execution's deadline is
passed down by ``BridgeHost``; per-server caps are the catalog's (``max_concurrent_calls``).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from codemode.bridge.host import BridgeHost
from codemode.cpus import take_process_cpus

__all__ = ["ParallelCalls"]

# Calls waiting for a worker, per worker, before more are answered in turn (back-pressure on
# code that sends calls faster than they finish).
_QUEUED_PER_WORKER = 16


class ParallelCalls:
    """Runs one execution's awaitable calls, at most ``workers`` at once."""

    def __init__(self, host: BridgeHost, wake: Callable[[], None], *, workers: int) -> None:
        self.host = host
        self.wake = wake
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._done: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.in_flight = 0

    def submit(self, frame: dict[str, Any]) -> bool:
        """Start answering ``frame`` on a worker; its reply comes out of ``replies()``. False
        when too many calls wait already: answer it in turn instead (the guest waits)."""
        if self.in_flight >= self.workers * _QUEUED_PER_WORKER:
            return False
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self.workers, thread_name_prefix="codemode-call", initializer=take_process_cpus
            )
        context = contextvars.copy_context()
        with self._lock:
            self.in_flight += 1
        future = self._pool.submit(context.run, self.host.handle, frame)
        future.add_done_callback(self._finished)
        return True

    def _finished(self, future: Future[dict[str, Any]]) -> None:
        if future.cancelled():
            with self._lock:
                self.in_flight -= 1
            return
        reply = future.result()  # handle() never raises
        with self._lock:
            self._done.append(reply)
            self.in_flight -= 1
        self.wake()

    def replies(self) -> list[dict[str, Any]]:
        """The replies of the calls finished since the last look, in the order they finished."""
        with self._lock:
            done, self._done = self._done, []
        return done

    def close(self) -> None:
        """The execution ended: calls not started never start; running ones finish on their
        own (bounded by their timeout) and their replies are dropped."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

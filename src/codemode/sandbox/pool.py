"""Warm pool: sandboxes started ahead of demand, refilled in the background.

Every sandbox is started by one of the pool's long-lived starter threads. bwrap's
``--die-with-parent`` ties a sandbox's life to the *thread* that forked it, so a sandbox started
from a short-lived worker thread would be killed when that thread exits; starter threads live
as long as the pool. With ``starters > 1`` several sandboxes start at once (a burst of new
sessions waits less). How many stay ready is a ``WarmTarget``: fixed by default, adaptive
(growing with the arrival rate, bounded by memory) when given one.

A caller that finds no ready sandbox waits for the first start to finish, whichever starter
runs it: a start begun to refill the queue serves a waiting caller before the queue. (Each
caller waiting for the start begun for it alone let sandboxes sit ready while callers of a
burst waited for their own.)

A client at work (connecting, listing, calling a tool) announces a session (``expect``): a
pool that fell to its idle floor refills to its floor before that session asks, instead of
when it asks.

A refill that only tops up the queue waits until no sandbox has been taken for
``REFILL_SETTLE_S``, while the queue still holds a quarter of the target: during a burst its
starts would take CPU from the sessions that arrive (a start costs about 5.5 ms of the
machine's CPU, 1 ms of it the gateway's); once the queue runs low, or a caller waits, starts
begin at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from concurrent.futures import Future

from codemode.errors import CodemodeError, SandboxError
from codemode.sandbox.backends import SandboxBackend
from codemode.sandbox.demand import (
    FORKED_SANDBOX_BYTES,
    STARTED_SANDBOX_BYTES,
    WarmTarget,
    warm_target,
)
from codemode.sandbox.runner import Sandbox
from codemode.settings.sandbox import SandboxSettings

__all__ = ["SandboxPool"]

log = logging.getLogger(__name__)

#: How long after the last sandbox taken a refill that only tops up the queue waits.
REFILL_SETTLE_S = 0.05


class SandboxPool:
    """Keeps ``size`` ready sandboxes (more while a burst arrives, when the target is adaptive).
    ``acquire`` takes a ready one, or the next one any starter finishes."""

    def __init__(
        self,
        backend: SandboxBackend,
        size: int = 2,
        *,
        start_timeout_s: float = 15.0,
        starters: int = 1,
        target: WarmTarget | None = None,
    ) -> None:
        if size < 0:
            raise SandboxError("pool size cannot be negative", fix="set sandbox.pool_size >= 0")
        self.backend = backend
        self.size = size
        self.start_timeout_s = start_timeout_s
        self.starters = max(starters, 1)
        self.target = target if target is not None else WarmTarget(size)
        self._ready: deque[Sandbox] = deque()
        self._cond = threading.Condition()
        self._closed = False
        # Sandboxes being started for the ready queue now (by any starter thread).
        self._starting = 0
        self._starter_threads: list[threading.Thread] = []
        self._thread: threading.Thread | None = None
        # Callers waiting for the next sandbox a starter finishes, oldest first.
        self._requests: deque[Future[Sandbox]] = deque()
        # Every live sandbox this pool started (ready ones and sessions'), to stop at close.
        self._all: set[Sandbox] = set()
        self.last_error: CodemodeError | None = None
        # time.monotonic() of the last acquire: real time, as the settle is (the target's
        # clock, which dates arrivals, may be a test's).
        self._last_taken = float("-inf")
        self._stopping = 0  # ready sandboxes above the target, taken out and being stopped

    @classmethod
    def from_settings(
        cls,
        backend: SandboxBackend,
        settings: SandboxSettings,
        *,
        idle_after_s: float | None = None,
    ) -> SandboxPool:
        """The pool a ``[sandbox]`` table describes: size, adaptive growth, starter threads;
        after ``idle_after_s`` with no sandbox taken, none kept ready where they fork from a
        template (and ``pool_size`` elsewhere: a start there takes tens of milliseconds)."""
        forks = getattr(backend, "template", None) is not None
        target = warm_target(
            settings.pool_size,
            settings.pool_size_max,
            settings.pool_memory_mib,
            idle_after_s=idle_after_s,
            idle_floor=0 if forks else settings.pool_size,
            sandbox_bytes=FORKED_SANDBOX_BYTES if forks else STARTED_SANDBOX_BYTES,
        )
        return cls(backend, settings.pool_size, starters=settings.pool_starters, target=target)

    def start(self) -> SandboxPool:
        if self._thread is None:
            for index in range(self.starters):
                thread = threading.Thread(
                    target=self._refill, name=f"codemode-sandbox-pool-{index}", daemon=True
                )
                self._starter_threads.append(thread)
                thread.start()
            self._thread = self._starter_threads[0]
        return self

    def expect(self) -> None:
        """A session is likely soon (a client at work). A pool idle at its idle floor goes
        back to its floor and starts what that needs now, the template first where sandboxes
        fork from one (about 70 ms: after an idle spell the first session waited for it); a
        warm pool starts nothing more. Cheap: called on the gateway's event loop."""
        if self.target.wake():  # the starters sleep until the target changes: it just did
            with self._cond:
                self._cond.notify_all()

    def _spawn_here(self) -> Sandbox:
        sandbox = Sandbox(self.backend.spawn(), self.backend.limits)
        with self._cond:
            self._all = {s for s in self._all if not s.dead}
            self._all.add(sandbox)
        sandbox.wait_ready(self.start_timeout_s)
        return sandbox

    def spawn(self) -> Sandbox:
        """A sandbox whose start finishes after this call (one more start is begun for it, on
        the pool's threads), once its guest is ready; a start that fails meanwhile raises."""
        with self._cond:
            future = self._request()
        return self._wait(future)

    def acquire(self) -> Sandbox:
        self.target.arrived()
        with self._cond:
            if self._closed:
                raise SandboxError("the sandbox pool is closed")
            self._last_taken = time.monotonic()
            self._cond.notify_all()  # the target may have grown: starters look again
            while self._ready:
                sandbox = self._ready.popleft()
                self._cond.notify_all()
                if sandbox.process.alive():
                    return sandbox
                sandbox.kill()
            # Asked in the same hold of the lock: a sandbox that becomes ready from now on
            # goes to this caller, not to the queue.
            future = self._request()
        return self._wait(future)

    def _request(self) -> Future[Sandbox]:
        """Wait in line for the next start that finishes (lock held)."""
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        if self._thread is None:
            self.start()
        future: Future[Sandbox] = Future()
        self._requests.append(future)
        self._cond.notify_all()
        return future

    def _wait(self, future: Future[Sandbox]) -> Sandbox:
        try:
            return future.result(timeout=self.start_timeout_s + 30)
        except TimeoutError:
            with self._cond:
                if not future.done():  # no starter hands it a sandbox after this
                    future.cancel()
                    with contextlib.suppress(ValueError):
                        self._requests.remove(future)
            if future.cancelled():
                raise SandboxError(
                    f"no sandbox started within {self.start_timeout_s + 30:.0f} s",
                    fix="check `codemode doctor`; a loaded machine starts sandboxes slowly",
                ) from None
            return future.result()

    def forget(self, sandbox: Sandbox) -> None:
        """``sandbox`` has been stopped by its session: the pool need not stop it at close,
        and keeps nothing of it (its buffers and last output went with the session)."""
        with self._cond:
            self._all.discard(sandbox)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def ready_count(self) -> int:
        """Sandboxes started and waiting for a session now."""
        with self._cond:
            return len(self._ready)

    def wait_full(self, timeout_s: float = 30.0) -> bool:
        """Wait until the pool holds what its target asks (``size`` while it is not adaptive),
        starts none and will start none (a refill may wait for a burst to pass:
        ``_settling_s``), and stops none above the target (for benchmarks and tests: a
        sandbox starting or stopping is neither ready nor gone)."""

        def full() -> bool:
            if self._closed:
                return True
            if self._starting or self._stopping or self._short():
                return False
            return len(self._ready) <= self.target.size()

        with self._cond:
            return self._cond.wait_for(full, timeout_s)

    def _short(self) -> bool:
        """Fewer started or starting than the target plus the callers waiting (lock held)."""
        wanted = self.target.size() + len(self._requests)
        return len(self._ready) + self._starting < wanted

    def _settling_s(self) -> float:
        """How long a start that would only top up the queue waits yet (lock held): 0 once
        nothing was taken for ``REFILL_SETTLE_S``, while a caller waits, or when the queue
        holds less than a quarter of the target."""
        left = self._last_taken + REFILL_SETTLE_S - time.monotonic()
        if left <= 0 or self._requests:
            return 0.0
        # The target only now: while it grows it reads the memory (``_short`` just did).
        if len(self._ready) + self._starting < max(1, self.target.size() // 4):
            return 0.0
        return left

    def _next_request(self) -> Future[Sandbox] | None:
        """The oldest caller still waiting (lock held)."""
        while self._requests:
            request = self._requests.popleft()
            if not request.done():
                return request
        return None

    def _trim(self) -> None:
        """Stop ready sandboxes above the target (the burst is over), newest first; once the
        pool is idle with none left anywhere, let the backend rest (stop its template)."""
        with self._cond:
            extra = len(self._ready) - self.target.size()
            surplus = [self._ready.pop() for _ in range(max(extra, 0))]
            self._stopping += len(surplus)
        try:
            for sandbox in surplus:
                sandbox.kill()
        finally:
            with self._cond:
                self._stopping -= len(surplus)
                if surplus:
                    self._cond.notify_all()
        with self._cond:
            # Under the lock, where none of this pool's starts can begin meanwhile (the
            # template itself refuses while any fork of it runs or is under way).
            if not self.target.idle() or self.target.size() > 0:
                return
            self._all = {s for s in self._all if not s.dead}
            if self._all or self._ready or self._starting or self._requests:
                return
            self.backend.rest()

    def _refill(self) -> None:
        failures = 0
        recheck_s = self.target.recheck_s
        while True:
            with self._cond:
                # A target that changes with time is looked at again now and then.
                self._cond.wait_for(lambda: self._closed or self._short(), timeout=recheck_s)
                if self._closed:
                    self._fail_requests(SandboxError("the sandbox pool is closed"))
                    return
                short = self._short()
                if short:
                    settling_s = self._settling_s()
                    if settling_s > 0:  # a burst is arriving: start once it has passed
                        self._cond.wait(timeout=settling_s)
                        continue
                    self._starting += 1
            if not short:
                self._trim()
                continue
            try:
                sandbox = self._spawn_here()
                failures = 0
            except BaseException as error:
                with self._cond:
                    self._starting -= 1
                    request = self._next_request()
                    if request is not None:  # the waiting caller hears why
                        request.set_exception(error)
                if request is not None:
                    continue
                if self.closed:
                    return
                if not isinstance(error, CodemodeError):
                    raise
                self.last_error = error
                failures += 1
                log.warning("sandbox pool could not start a sandbox: %s", error)
                with self._cond:
                    # Back off instead of spinning when sandboxes cannot start at all.
                    self._cond.wait(timeout=min(0.1 * 2**failures, 5.0))
                continue
            with self._cond:
                self._starting -= 1
                if self.closed:
                    sandbox.kill()
                    self._fail_requests(SandboxError("the sandbox pool is closed"))
                    return
                request = self._next_request()
                if request is not None:
                    request.set_result(sandbox)
                else:
                    self._ready.append(sandbox)
                self._cond.notify_all()
            # Not kept by this thread while it waits for the next start: a session that has
            # stopped this sandbox must be the last to hold it.
            del sandbox, request

    def _fail_requests(self, error: SandboxError) -> None:
        """Every waiting caller hears ``error`` (lock held)."""
        while (request := self._next_request()) is not None:
            request.set_exception(error)

    def close(self) -> None:
        """Stop every sandbox this pool started (sessions' included), then the thread."""
        with self._cond:
            self._closed = True
            # Take the list before clearing anything: a ready sandbox referenced only by
            # the queue must still be stopped (its cgroup directories removed).
            started = [*self._ready, *self._all]
            self._ready.clear()
            self._all = set()
        for sandbox in started:
            sandbox.kill()
        with self._cond:
            self._cond.notify_all()
        for thread in self._starter_threads:
            thread.join(timeout=30)
        self._starter_threads.clear()
        self._thread = None
        with self._cond:  # one started while closing
            late, self._all = list(self._all), set()
        for sandbox in late:
            sandbox.kill()

    def __enter__(self) -> SandboxPool:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.close()

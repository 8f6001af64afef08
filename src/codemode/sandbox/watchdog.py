"""One thread that watches every running execution and ends those that break a limit.

The execution loop can wait inside a tool call for a long time; the limits must hold meanwhile,
so they are checked here, every ``interval_s``, whatever the loop is doing. A breach is
recorded first and the sandbox killed second, so the result names the limit that was hit.

A check reads the sandbox, not the execution: one the watchdog took up just before an execution
ended must not run on into the next execution of the same sandbox, find that one's usage past
a limit and kill the sandbox under the ended execution's name (the next result would then read
"sandbox_exit", its limit lost). So an execution's ``Watched`` ends with it (``unwatch``),
after any check under way, and checks nothing after that.
"""

from __future__ import annotations

import threading
import time

from codemode.sandbox.meter import SandboxMeter, Usage
from codemode.settings.sandbox import Limits

__all__ = ["WATCHDOG", "Watchdog", "Watched", "breached"]

INTERVAL_S = 0.025
# Ticks with nothing watched before the thread sleeps (about a second).
QUIET_TICKS = 40


def breached(usage: Usage, limits: Limits, cpu_start: float) -> str | None:
    """The limit ``usage`` breaks, if any (the names match ``ExecutionResult.limit``)."""
    if usage.processes_hit:
        return "processes"
    if usage.memory_hit or (
        usage.memory_bytes is not None and usage.memory_bytes > limits.memory_bytes
    ):
        return "memory"
    if usage.cpu_seconds - cpu_start > limits.cpu_time_s:
        return "cpu_time"
    if usage.workspace_inodes > limits.workspace_inodes:
        return "workspace_inodes"
    return None


class Watched:
    """One execution under watch: its meter, its limits and the first breach seen."""

    def __init__(self, meter: SandboxMeter, limits: Limits) -> None:
        self.meter = meter
        self.limits = limits
        self.cpu_start = meter.cpu_seconds()
        self.breach: str | None = None
        self.peak_memory_bytes = 0
        self._lock = threading.Lock()
        self._ended = False

    def end(self) -> None:
        """The execution is over: a check under way finishes first, later ones do nothing."""
        with self._lock:
            self._ended = True

    def check(self) -> str | None:
        """Read the meter; on a breach, record it and kill the sandbox. Any thread; nothing
        once ended (the sandbox may be running its next execution by then)."""
        with self._lock:
            if self.breach is not None or self._ended:
                return self.breach
            usage = self.meter.usage()
            if usage.memory_bytes is not None:
                self.peak_memory_bytes = max(self.peak_memory_bytes, usage.memory_bytes)
            breach = breached(usage, self.limits, self.cpu_start)
            if breach is not None:
                self.breach = breach
                self.meter.kill()
            return breach


class Watchdog:
    """A daemon thread, started on first use, asleep after a quiet spell.

    It ticks every ``interval_s`` and checks everything watched at that tick, so an
    execution's first check comes within one interval of its start, not at once: until then
    the sandbox was stopped, and the execution loop checks the end itself. A short execution
    between two ticks pays for no reading. After ``quiet_ticks`` ticks with nothing watched the
    thread sleeps until the next ``watch`` wakes it; until then a ``watch`` costs no wake-up
    (a warm execution every few hundred microseconds used to wake it each time).
    """

    def __init__(self, interval_s: float = INTERVAL_S, quiet_ticks: int = QUIET_TICKS) -> None:
        self.interval_s = interval_s
        self.quiet_ticks = quiet_ticks
        self._watched: set[Watched] = set()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._idle = False  # the thread sleeps until a ``watch`` wakes it

    def watch(self, watched: Watched) -> None:
        with self._cond:
            self._watched.add(watched)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="codemode-sandbox-watchdog", daemon=True
                )
                self._thread.start()
            elif self._idle:
                self._cond.notify_all()

    def unwatch(self, watched: Watched) -> None:
        """Stop watching ``watched`` and end it: a tick's list may still hold it."""
        with self._cond:
            self._watched.discard(watched)
        watched.end()

    def _run(self) -> None:
        quiet = 0
        while True:
            with self._cond:
                if not self._watched and quiet >= self.quiet_ticks:
                    self._idle = True
                    self._cond.wait_for(lambda: bool(self._watched))
                    self._idle = False
                deadline = time.monotonic() + self.interval_s
                while (left := deadline - time.monotonic()) > 0:
                    self._cond.wait(left)
                current = list(self._watched)
            quiet = 0 if current else quiet + 1
            for watched in current:
                watched.check()


WATCHDOG = Watchdog()

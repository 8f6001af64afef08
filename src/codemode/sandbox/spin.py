"""Wait for a short execution's answer on the CPU, not asleep, while the machine has a CPU to
spare, and only as long as this sandbox's answers lately took.

A warm execution answers in about 0.1 ms. A thread asleep in epoll is woken by an interrupt,
and an idle virtual CPU takes tens of microseconds to wake: looking at the bridge for up to
100 us first took a warm execution from 0.205 to 0.16 ms on this project's 2-vCPU machines.
On a busy machine the same spin takes the CPU that the guest or others wait for (0.15-0.22 ms
became 0.19-0.28 ms at load 4), so it spins only while fewer tasks are runnable than there are
CPUs (the kernel's count of runnable tasks, /proc/loadavg's fourth field: the load average
itself takes a minute to follow a change).

How long (``SpinBudget``): a slower VM answers after 150-300 us, and a fixed 100 us spin fell
asleep just before the answer (300 us took the warm execution there from 0.53 to 0.47 ms, 10
of 10 rounds alternated, at the same host CPU). But a spin holds the GIL between its looks (a
thread that waits for it wakes too late to take it), and an execution that runs for
milliseconds gains nothing from one. So each sandbox spins for 1.5 times its recent answers'
median (``SPIN_MIN_S`` to ``SPIN_MAX_S``), and not at all once they take longer than that:
a warm execution 0.459 -> 0.427 ms against a fixed 100 us (8 of 10 rounds), and beside
executions of 3 ms another thread of the gateway was late for the GIL by 584 us at p99,
against 684 (100 us) and 870 (300 us).
"""

from __future__ import annotations

import os
import selectors
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable

from codemode.sandbox.proctree import read_small

__all__ = [
    "SPARE_CPU",
    "SPIN_MAX_S",
    "SPIN_MIN_S",
    "SPIN_S",
    "SpareCpu",
    "SpinBudget",
    "runnable_tasks",
    "spin_until_ready",
]

#: The spin before a sandbox has answered (its first executions), and its bounds after.
SPIN_S = 300e-6
SPIN_MIN_S = 100e-6
SPIN_MAX_S = 500e-6
#: The answers a sandbox's spin is sized by (the last ones).
_ANSWERS_KEPT = 8
# The count of runnable tasks is read at most this often while it says a CPU is spare, and
# sooner once it said none was: one busy moment (a sandbox starting beside) must not keep the
# spin off for the next few hundred executions.
_READ_EVERY_S = 0.1
_READ_AGAIN_BUSY_S = 0.01


def runnable_tasks() -> int:
    """Tasks running or waiting for a CPU on this machine now (this thread among them)."""
    return int(read_small("/proc/loadavg").split()[3].split("/")[0])


class SpareCpu:
    """Whether a CPU this process may use is idle: fewer tasks runnable than CPUs. Asked
    while the sandbox is stopped, so that it counts the runner and not the guest."""

    def __init__(
        self,
        runnable: Callable[[], int] = runnable_tasks,
        cpus: Callable[[], int] = lambda: len(os.sched_getaffinity(0)),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._runnable = runnable
        self._cpus = cpus
        self._clock = clock
        self._lock = threading.Lock()
        self._read_at = -_READ_EVERY_S
        self._spare = False

    def __call__(self) -> bool:
        now = self._clock()
        with self._lock:
            if now - self._read_at >= (_READ_EVERY_S if self._spare else _READ_AGAIN_BUSY_S):
                self._read_at = now
                try:
                    self._spare = self._runnable() < self._cpus()
                except (OSError, ValueError, IndexError):
                    self._spare = False
            return self._spare


SPARE_CPU = SpareCpu()


class SpinBudget:
    """How long one sandbox's runner spins for the next answer: 1.5 times the median of its
    last answers (``answered``), within ``SPIN_MIN_S`` and ``SPIN_MAX_S``; none while they
    take longer than ``SPIN_MAX_S`` (the runner sleeps until the answer instead)."""

    def __init__(self, spare: Callable[[], bool] = SPARE_CPU) -> None:
        self._spare = spare
        self._answers: deque[float] = deque(maxlen=_ANSWERS_KEPT)

    @property
    def typical(self) -> float | None:
        """The median of the last answers (None before the first)."""
        return statistics.median(self._answers) if self._answers else None

    def seconds(self) -> float:
        typical = self.typical
        if typical is None:
            return SPIN_S
        if typical > SPIN_MAX_S:
            return 0.0
        return min(SPIN_MAX_S, max(SPIN_MIN_S, 1.5 * typical))

    def seconds_now(self) -> float:
        """``seconds``, or 0 while no CPU is spare (asked only when the budget is not 0
        already; asked while the guest cannot run, ``SPARE_CPU`` counts the runner, not it)."""
        seconds = self.seconds()
        if seconds and not self._spare():
            return 0.0
        return seconds

    def answered(self, seconds: float) -> None:
        """An execution answered ``seconds`` after its code was sent."""
        self._answers.append(seconds)


def spin_until_ready(
    selector: selectors.BaseSelector,
    seconds: float = SPIN_S,
    *,
    take: Callable[[object], bool] | None = None,
) -> bool:
    """Look at ``selector`` without sleeping until something is ready or ``seconds`` passed;
    True when something is ready. With ``take``, each ready key's data goes to it first, and
    the spin goes on while it says the key was not the awaited one (it took output in: a guest
    flushes its output just before it answers, and stopping there sleeps through the answer)."""
    until = time.monotonic() + seconds
    while True:
        ready = selector.select(0)
        if ready:
            if take is None:
                return True
            taken = [take(key.data) for key, _events in ready]  # each one handed over
            if not all(taken):
                return True
        if time.monotonic() >= until:
            return False

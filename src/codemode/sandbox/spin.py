"""Wait for a short execution's answer on the CPU, not asleep, while the machine has a CPU to
spare.

A warm execution answers in about 0.1 ms. A thread asleep in epoll is woken by an interrupt,
and an idle virtual CPU takes tens of microseconds to wake: looking at the bridge for up to
``SPIN_S`` first took a warm execution from 0.205 to 0.16 ms on this project's 2-vCPU machines.
On a slower VM the answer comes after 100-300 us, and a spin of 100 us fell asleep just before
it: 300 us took the warm execution from 0.53 to 0.47 ms there (10 of 10 rounds alternated), at
the same host CPU (the sleep and the wake-up cost what the longer spin does). An execution
that runs longer pays the spin once, on a CPU that was idle.
On a busy machine the same spin takes the CPU that the guest or others wait for (0.15-0.22 ms
became 0.19-0.28 ms at load 4), so it spins only while fewer tasks are runnable than there are
CPUs (the kernel's count of runnable tasks, /proc/loadavg's fourth field: the load average
itself takes a minute to follow a change).
"""

from __future__ import annotations

import os
import selectors
import threading
import time
from collections.abc import Callable

from codemode.sandbox.proctree import read_small

__all__ = ["SPARE_CPU", "SPIN_S", "SpareCpu", "runnable_tasks", "spin_until_ready"]

SPIN_S = 300e-6
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

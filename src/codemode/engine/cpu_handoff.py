"""Wake a worker thread on the CPU of the thread that hands it work.

On a virtual machine, waking a thread that sleeps on another CPU is the dearest part of
handing it a job: the hand-over took 59-63 us there against 29-35 us when the sleeper was
moved to the waker's CPU first (this project's 2-vCPU machines; the woken worker then runs
as soon as the event loop thread waits for its answer). So the event loop moves an idle worker
to its own CPU before waking it, and the worker, once awake, takes back every CPU it may use:
a long job may still move, and what it starts (threads, sandbox processes) inherits the whole
set, never the one CPU. On a busy machine (no CPU idle) nothing is moved: no sleeping CPU
needs waking, and the caller's CPU is the one others wait for (moving made a warm execution
3% slower at load 4).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Callable, Collection
from typing import Protocol

from codemode.sandbox.spin import SPARE_CPU

__all__ = ["CALLER_CPU", "CallerCpu", "CpuHandoff", "NoHandoff"]


class CpuHandoff(Protocol):
    """Where a worker is woken. ``allowed`` is the set of CPUs the worker may use."""

    def move_to_caller(self, native_id: int, allowed: Collection[int]) -> bool:
        """Called by the thread handing the work: move the worker ``native_id`` to this
        thread's CPU. True if it was moved (``restore`` is then owed)."""
        ...

    def restore(self, allowed: Collection[int]) -> None:
        """Called by the woken worker on itself: every CPU in ``allowed`` again."""
        ...


class NoHandoff:
    """Wake workers wherever the scheduler likes."""

    def move_to_caller(self, native_id: int, allowed: Collection[int]) -> bool:
        return False

    def restore(self, allowed: Collection[int]) -> None:
        return None


@functools.cache
def _sched_getcpu() -> Callable[[], int] | None:
    try:
        function: Callable[[], int] = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):
        return None
    return function


class CallerCpu:
    """Move the worker to the caller's CPU with ``sched_setaffinity`` while ``spare()`` says a
    CPU is idle. Where that is refused (a seccomp filter, a platform without it), it stops
    trying after the first refusal."""

    def __init__(self, spare: Callable[[], bool] = SPARE_CPU) -> None:
        self._working = hasattr(os, "sched_setaffinity") and _sched_getcpu() is not None
        self._spare = spare

    def move_to_caller(self, native_id: int, allowed: Collection[int]) -> bool:
        getcpu = _sched_getcpu()
        if not self._working or getcpu is None or len(allowed) < 2 or not self._spare():
            return False
        cpu = getcpu()
        if cpu not in allowed:
            return False
        try:
            os.sched_setaffinity(native_id, (cpu,))
        except ProcessLookupError:  # the worker has just exited
            return False
        except OSError:  # refused here: not worth a failing system call on every job
            self._working = False
            return False
        return True

    def restore(self, allowed: Collection[int]) -> None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, allowed)


#: The process's hand-over.
CALLER_CPU = CallerCpu()

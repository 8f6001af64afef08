"""Is a guest between executions? Asked by the host once the guest says "done".

An honest guest, once it has sent "done", blocks in its read of the bridge until the next
frame. Code that sent its own "done" is elsewhere, or keeps the CPU: the sandbox is then killed
rather than stopped and kept. The host reads /proc/<pid>/syscall (before the stop: a task on
its way to stopping shows no syscall). On a loaded machine an honest guest may wait long for a
CPU: past the first 50 ms it is judged by the CPU it used, not by the time that passed.
"""

from __future__ import annotations

import ctypes
import functools
import os
import time
from collections.abc import Callable

from codemode.sandbox.proctree import read_small

__all__ = ["SETTLE_S", "waits_for_frames"]

#: How long an honest guest may take to reach its read of the bridge, on an idle machine.
SETTLE_S = 0.05
#: For this long the host looks again at once: the guest is microseconds from its read.
SPIN_S = 0.00005
#: Past ``SETTLE_S``, the guest's main thread may use this much more CPU: an honest guest needs
#: well under a millisecond to get to its read; code that keeps the CPU uses it all. Wall time
#: alone misjudged a guest that simply waited for a CPU on a loaded machine, and killed it.
SETTLE_CPU_S = 0.02
#: Code that is neither on the CPU nor in the read (asleep elsewhere) is given up on after this.
SETTLE_MAX_S = 2.0
# Syscall numbers (as /proc/<pid>/syscall shows them) of a read on the bridge socket.
_READ_SYSCALLS = {"x86_64": frozenset({"0", "45"}), "aarch64": frozenset({"63", "207"})}.get(
    os.uname().machine, frozenset()
)


def waits_for_frames(
    pid: int | None, bridge_fd: int | None, read: Callable[[str], str] = read_small
) -> bool:
    """Is the guest's main thread blocked in its read of the bridge? Waits (``SETTLE_S`` at
    most) for it to get there. ``read`` reads a /proc file (the meter's held files)."""
    if pid is None:
        return False
    if bridge_fd is None or not _READ_SYSCALLS:
        return _settles(pid)  # an architecture we do not know: off the CPU is all we see
    path = f"/proc/{pid}/syscall"
    pacer = _Pacer(lambda: _last_ran_here(pid, read))
    budget = _CpuBudget(pid)
    while True:
        try:
            # "running", or the syscall the thread is blocked in and its arguments.
            fields = read(path).split()
        except OSError:
            return _settles(pid)  # not readable here (a strict ptrace policy)
        if len(fields) > 1 and fields[0] in _READ_SYSCALLS and int(fields[1], 16) == bridge_fd:
            return True
        if time.monotonic() - pacer.begun >= SETTLE_S and budget.spent():
            return False
        pacer.pause()


def _settles(pid: int) -> bool:
    """Wait (``SETTLE_S`` at most) until the guest's main thread is off the CPU."""
    pacer = _Pacer()
    budget = _CpuBudget(pid)
    while time.monotonic() - pacer.begun < SETTLE_S or not budget.spent():
        if _state(pid) != "R":
            return True
        pacer.pause()
    return False


class _CpuBudget:
    """Has the guest's main thread had its chance? Read lazily (the first look is past
    ``SETTLE_S``), so the common case, a guest already in its read, costs nothing more."""

    def __init__(self, pid: int) -> None:
        self.path = f"/proc/{pid}/schedstat"  # the main thread's time on a CPU, in ns
        self.first: int | None = None
        self.since = 0.0

    def spent(self) -> bool:
        used = self._cpu_ns()
        if used is None:
            return True  # no reading here: the wall-clock bound alone, as before
        now = time.monotonic()
        if self.first is None:
            self.first, self.since = used, now
            return False
        return used - self.first >= SETTLE_CPU_S * 1e9 or now - self.since >= SETTLE_MAX_S

    def _cpu_ns(self) -> int | None:
        try:
            return int(read_small(self.path).split()[0])
        except (OSError, ValueError, IndexError):
            return None


def _state(pid: int) -> str:
    try:
        return read_small(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


@functools.cache
def _this_cpu() -> Callable[[], int] | None:
    """The C library's ``sched_getcpu`` (None where there is none)."""
    try:
        function = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):
        return None
    function.argtypes = []
    function.restype = ctypes.c_int
    return function


def _last_ran_here(pid: int, read: Callable[[str], str]) -> bool:
    """Did the guest last run on the CPU this thread runs on? Then it is not running now: it
    waits for this very CPU."""
    this_cpu = _this_cpu()
    if this_cpu is None:
        return False
    try:
        last = int(read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return False
    return last == this_cpu()


class _Pacer:
    """Between two looks at the guest: look again at once for ``SPIN_S``, then yield the CPU a
    few times, then nap, longer each time (on a busy machine yielding again and again only
    burns the CPU the guest waits for). The guest is usually microseconds from its read, on
    another CPU: yielding at once handed this CPU to whatever else was runnable for a whole
    time slice, about 4 ms per execution at load 4. A guest that waits for this thread's own
    CPU (``waits_here``, asked once) is yielded to at once: spinning only kept it off the CPU,
    50 us per execution where the scheduler had put both on one CPU."""

    def __init__(self, waits_here: Callable[[], bool] = lambda: False) -> None:
        self.begun = time.monotonic()
        self.yields = 0
        self.naps = 0
        self._waits_here = waits_here
        self._spin: bool | None = None

    def pause(self) -> None:
        if self._spin is None:
            self._spin = not self._waits_here()
        if self._spin and time.monotonic() - self.begun < SPIN_S:
            return
        if self.yields < 3:
            self.yields += 1
            os.sched_yield()
            return
        time.sleep(min(0.0005, 0.00005 * (1 << min(self.naps, 4))))
        self.naps += 1

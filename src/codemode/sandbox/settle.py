"""Is a guest between executions? Asked by the host once the guest says "done".

An honest guest, once it has sent "done", blocks in its wait for the bridge (a poll of it
alone, then its read) until the next frame. Code that sent its own "done" is elsewhere, or
keeps the CPU: the sandbox is then killed rather than stopped and kept. The host reads
/proc/<pid>/syscall (before the stop: a task on its way to stopping shows no syscall). On a
loaded machine an honest guest may wait long for a CPU: past the first 50 ms it is judged by
the CPU it used, not by the time that passed.
"""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import time
from collections.abc import Callable

from codemode.sandbox.proctree import read_at, read_small

__all__ = ["SETTLE_S", "Memory", "read_memory", "waits_for_frames", "waits_on"]

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
# ... and of a poll of it (aarch64 has ppoll alone).
_POLL_SYSCALLS = {
    "x86_64": {"7": "poll", "271": "ppoll"},
    "aarch64": {"73": "ppoll"},
}.get(os.uname().machine, {})
# struct pollfd: the descriptor, the events asked for, the events returned.
_POLLFD = struct.Struct("=ihh")
# Input events only (POLLIN, POLLPRI, POLLRDNORM, POLLRDBAND): a poll for output would end
# as soon as the socket can be written to, with nothing sent by the host.
_INPUT_EVENTS = 0x1 | 0x2 | 0x40 | 0x80

#: Reads ``size`` bytes of a process's memory at an address (OSError when it cannot).
Memory = Callable[[int, int], bytes]


def waits_for_frames(
    pid: int | None,
    bridge_fd: int | None,
    read: Callable[[str], str] = read_small,
    memory: Memory | None = None,
) -> bool:
    """Is the guest's main thread blocked in its wait for the bridge (``waits_on``)? Waits
    (``SETTLE_S`` at most) for it to get there. ``read`` reads a /proc file (the meter's held
    files), ``memory`` the guest's memory (by default through /proc/<pid>/mem)."""
    if pid is None:
        return False
    if bridge_fd is None or not _READ_SYSCALLS:
        return _settles(pid)  # an architecture we do not know: off the CPU is all we see
    path = f"/proc/{pid}/syscall"
    pacer = _Pacer(lambda: _last_ran_here(pid, read))
    budget = _CpuBudget(pid)
    while True:
        try:
            syscall = read(path)
        except OSError:
            return _settles(pid)  # not readable here (a strict ptrace policy)
        if waits_on(syscall, bridge_fd, memory or functools.partial(read_memory, pid)):
            return True
        if time.monotonic() - pacer.begun >= SETTLE_S and budget.spent():
            return False
        pacer.pause()


def waits_on(syscall: str, fd: int, memory: Memory) -> bool:
    """Does ``syscall`` (the text of /proc/<pid>/syscall: "running", or the system call the
    thread is blocked in, its arguments in hexadecimal) show the thread waiting for input on
    descriptor ``fd`` alone? A read of it, or a poll of it (the guest's way: a poll is not
    woken when the host reads what the guest sent, a read is) with no timeout; ``memory``
    reads the polled descriptor from the thread's memory (``size`` bytes at an address)."""
    fields = syscall.split()
    if len(fields) < 4:
        return False
    try:
        number, args = fields[0], [int(field, 16) for field in fields[1:4]]
    except ValueError:
        return False
    if number in _READ_SYSCALLS:
        return args[0] == fd
    kind = _POLL_SYSCALLS.get(number)
    if kind is None or args[1] & 0xFFFFFFFF != 1:  # exactly one descriptor polled
        return False
    # poll's timeout is an int: negative waits for ever. ppoll's is a pointer: NULL does.
    forever = args[2] & 0x80000000 if kind == "poll" else args[2] == 0
    if not forever:
        return False
    try:
        polled = memory(args[0], _POLLFD.size)
        polled_fd, events, _ = _POLLFD.unpack(polled)
    except (OSError, struct.error, OverflowError):
        return False
    return bool(polled_fd == fd and events & ~_INPUT_EVENTS == 0)


def read_memory(pid: int, address: int, size: int) -> bytes:
    """``size`` bytes of process ``pid``'s memory at ``address`` (OSError when it cannot)."""
    return read_at(f"/proc/{pid}/mem", address, size)


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

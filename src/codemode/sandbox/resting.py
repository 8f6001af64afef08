"""Can a guest between executions run at all? Proven from /proc, with no signal sent.

Between executions nothing of the code may run until the host sends the next frame. Stopping
every task does it, at a price paid on every warm execution: a SIGSTOP that wakes the guest
from its read only to stop it (and to notify its parent), a SIGCONT that wakes it again, two
system calls of the host; three or four wake-ups of the guest an execution where one does.

A guest that is its sandbox's only task, asleep in its wait for the bridge (a poll of it alone
for input, with no timeout, or its read), with every signal it catches blocked, cannot run
either. A sleeping task is woken by what it waits for (data on the bridge, which only the host
writes) or by a signal; a blocked signal stays pending until it is unblocked, and one the task
does not catch is the kernel's to handle (it is ignored, or it stops or ends the task): no
instruction of the code runs. So such a guest is left asleep, and its next frame is its one
wake-up. The honest guest blocks every signal for its wait (and restores the code's mask when
the next frame came): a timer the code set is handled at the start of the next execution, as a
stopped sandbox handles it when resumed.

The readings are bracketed by the guest's scheduler counters (``/proc/<pid>/schedstat``: its
time on a CPU and the times it was scheduled). A task that ran at all between the first and
the last reading moves them, so equal counters mean the readings describe one moment of a task
that slept throughout. Any doubt (a reading fails, a second thread, a child, a caught signal
not blocked, another system call, counters that moved) and the sandbox is stopped, as before.
"""

from __future__ import annotations

from collections.abc import Callable

from codemode.sandbox.settle import Memory, waits_on

__all__ = ["rests_alone"]


def rests_alone(read: Callable[[str], str], memory: Memory, pid: int, bridge_fd: int) -> bool:
    """Is the guest ``pid`` the only task of its sandbox, asleep in its wait for ``bridge_fd``
    (``settle.waits_on``), every signal it catches blocked? ``read`` reads a /proc file (the
    meter's held files), ``memory`` the guest's memory."""
    counters = f"/proc/{pid}/schedstat"
    try:
        before = read(counters)
        status = read(f"/proc/{pid}/status")
        syscall = read(f"/proc/{pid}/syscall")
        waiting = waits_on(syscall, bridge_fd, memory)  # reads the polled descriptor
        children = read(f"/proc/{pid}/task/{pid}/children")
        after = read(counters)
    except OSError:
        return False
    if not waiting or not before or before != after or children.strip():
        return False
    try:
        threads = int(_field(status, "Threads"))
        caught = int(_field(status, "SigCgt"), 16)
        blocked = int(_field(status, "SigBlk"), 16)
    except ValueError:
        return False
    return threads == 1 and caught & ~blocked == 0


def _field(status: str, name: str) -> str:
    """The value of the line ``name:`` of /proc/<pid>/status (ValueError when it has none)."""
    key = f"\n{name}:"
    start = status.find(key)
    if start < 0:
        raise ValueError(f"no {name} in the status")
    start += len(key)
    end = status.find("\n", start)
    return status[start : end if end >= 0 else len(status)].strip()

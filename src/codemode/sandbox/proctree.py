"""A sandbox's processes as the host sees them in /proc: CPU, memory, tasks, signals.

Only processes in the sandbox's own pid namespace are read or signalled: a pid that ended and
was reused by another process of the host is never counted, stopped or killed. Signals go
through a pidfd opened before the namespace check, so the check and the signal concern the
same process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from codemode.sandbox.pidsignal import send_signal

__all__ = [
    "Proc",
    "children_of",
    "continue_each",
    "parse_proc",
    "pidns_of",
    "pss_bytes",
    "read_at",
    "read_small",
    "signal_each",
    "stop_each",
    "tree",
    "wait_stopped",
    "walk",
]

_TICK = os.sysconf("SC_CLK_TCK")
# Stopped (by a signal, or traced), or ended.
_STOPPED_STATES = frozenset("tTZXx")
_MAX_PROCS = 4096


def read_small(path: str | Path) -> str:
    """A small /proc or cgroup file. Raises OSError like ``Path.read_text``; about 2.5x
    cheaper, which counts on the per-execution path (a dozen such reads each time)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def read_at(path: str, offset: int, size: int) -> bytes:
    """``size`` bytes (fewer at the end) at ``offset`` of a file: a process's memory,
    /proc/<pid>/mem, read at an address. Raises OSError like ``read_small``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.pread(fd, size, offset)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class Proc:
    pid: int
    state: str
    # utime + stime + cutime + cstime: its own CPU and that of every child it reaped.
    cpu_seconds: float
    threads: int
    # Resident anonymous and shared-memory pages (an upper bound of what it holds alone).
    rss_bytes: int


def children_of(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (from /proc; empty when it is gone)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        with contextlib.suppress(OSError, ValueError):
            found += [int(c) for c in read_small(f"/proc/{pid}/task/{tid}/children").split()]
    return found


def pidns_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _read(pid: int) -> Proc | None:
    try:
        return parse_proc(pid, read_small(f"/proc/{pid}/stat"), read_small(f"/proc/{pid}/status"))
    except (OSError, IndexError, ValueError):
        return None


def parse_proc(pid: int, stat: str, status: str) -> Proc:
    """A ``Proc`` from the text of /proc/<pid>/stat and /proc/<pid>/status. Raises IndexError
    or ValueError on text that is not theirs."""
    fields = stat.rsplit(")", 1)[1].split()
    rss_kib = 0
    for line in status.splitlines():
        if line.startswith(("RssAnon:", "RssShmem:")):
            rss_kib += int(line.split()[1])
    ticks = sum(int(value) for value in fields[11:15])
    return Proc(pid, fields[0], ticks / _TICK, int(fields[17]), rss_kib * 1024)


def walk(root: int, pidns: str) -> list[Proc]:
    """``root`` and all its descendants (zombies included) in the namespace ``pidns``."""
    found: list[Proc] = []
    pending = [root]
    seen: set[int] = set()
    while pending and len(seen) < _MAX_PROCS:
        pid = pending.pop()
        if pid in seen or pidns_of(pid) != pidns:
            continue
        seen.add(pid)
        proc = _read(pid)
        if proc is None:
            continue
        found.append(proc)
        pending += children_of(pid)
    return found


def tree(root: int, pidns: str) -> list[int]:
    """The pids of ``root`` and its descendants in ``pidns`` (no per-process reads)."""
    found: list[int] = []
    pending = [root]
    while pending and len(found) < _MAX_PROCS:
        pid = pending.pop()
        if pid in found or pidns_of(pid) != pidns:
            continue
        found.append(pid)
        pending += children_of(pid)
    return found


def pss_bytes(pid: int) -> int:
    """Proportional anonymous and shared-memory pages: pages shared after a fork count once
    in total. Costly (it walks the page tables), so used only to confirm a high reading."""
    try:
        text = read_small(f"/proc/{pid}/smaps_rollup")
    except OSError:
        return 0
    total = 0
    for line in text.splitlines():
        if line.startswith(("Pss_Anon:", "Pss_Shmem:")):
            total += int(line.split()[1]) * 1024
    return total


def stop_each(pids: list[int], pidns: str) -> dict[int, int]:
    """SIGSTOP each process of ``pids`` still in ``pidns``; returns a pidfd for each one
    reached, kept open so that ``continue_each`` resumes these very processes."""
    held: dict[int, int] = {}
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            if pidns_of(pid) == pidns:
                send_signal(fd, signal.SIGSTOP)
                held[pid], fd = fd, -1
        except OSError:
            pass
        finally:
            if fd >= 0:
                os.close(fd)
    return held


def continue_each(held: dict[int, int]) -> None:
    """SIGCONT the processes ``stop_each`` stopped, through its pidfds, and close them."""
    for fd in held.values():
        try:
            send_signal(fd, signal.SIGCONT)
        except OSError:
            pass  # it has ended meanwhile (killed)
        finally:
            os.close(fd)


def signal_each(pids: list[int], pidns: str, signum: signal.Signals) -> list[int]:
    """Send ``signum`` to each process of ``pids`` still in ``pidns``; returns those reached."""
    reached = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            if pidns_of(pid) == pidns:
                send_signal(fd, signum)
                reached.append(pid)
        except OSError:
            pass
        finally:
            os.close(fd)
    return reached


def wait_stopped(pids: list[int], timeout_s: float) -> bool:
    """Wait until every thread of ``pids`` has stopped (or ended). A SIGSTOP is only pending
    until its target next leaves the kernel: a fork under way then still completes, and its
    child is seen only once the parent has stopped. False at the timeout."""
    deadline = time.monotonic() + timeout_s
    pending = list(pids)
    while pending:
        pid = pending[-1]
        try:
            states = [
                read_small(f"/proc/{pid}/task/{tid}/stat").rsplit(")", 1)[1].split(maxsplit=1)[0]
                for tid in os.listdir(f"/proc/{pid}/task")
            ]
        except (OSError, IndexError):
            states = []  # it has ended
        if all(state in _STOPPED_STATES for state in states):
            pending.pop()
        elif time.monotonic() >= deadline:
            return False
        else:
            time.sleep(0)
    return True

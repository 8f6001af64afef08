"""What a sandbox uses, read from the host, and how all of it is stopped between executions.

``CgroupMeter`` reads the sandbox's cgroups: the kernel caps its memory and its tasks.
``ProcMeter`` serves machines without cgroups for us (an ordinary
user, most of the time): the host walks the sandbox's process tree in /proc for the CPU of every
process that ever ran (the live ones, plus the children each one reaped: cutime and cstime; the
seccomp filter keeps SIGCHLD from being ignored, so no child is reaped unaccounted), the memory
of every process plus the sandbox's tmpfs mounts (their pages and inodes) and its sockets'
buffers, and the task count.

Both stop the sandbox between executions with SIGSTOP to every process of its pid namespace
(a cgroup freezer costs a millisecond or two per execution on cgroup v1), and resume it with
SIGCONT. The walk looks for children again once the processes it signalled have stopped: a fork
under way when the signal came still completes. A guest alone in its sandbox (one thread, no
child), asleep in its wait for the bridge with every signal it catches blocked, is not stopped
at all: it provably cannot run until its next frame (``resting``), read from six held files.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from dataclasses import dataclass

from codemode.sandbox.cgroups import CgroupSet
from codemode.sandbox.heldfiles import HeldFiles
from codemode.sandbox.layout import TMPFS_MOUNTS, WORKSPACE
from codemode.sandbox.pidsignal import send_signal
from codemode.sandbox.proctree import (
    Proc,
    continue_each,
    parse_proc,
    pidns_of,
    pss_bytes,
    signal_each,
    stop_each,
    tree,
    wait_stopped,
    walk,
)
from codemode.sandbox.resting import rests_alone
from codemode.settings.sandbox import Limits

__all__ = ["CgroupMeter", "ProcMeter", "SandboxMeter", "Usage"]

# Kernel memory behind one tmpfs inode (its inode and dentry; measured: 1,000 empty files
# in /tmp hold about 1 MiB of slab). Empty files hold no pages: without counting this, a
# sandbox without cgroups could fill the host's memory with them, unseen.
_INODE_BYTES = 1024
# Kernel memory one socket may hold in its queue: its send buffer at the default size (the
# seccomp filter keeps it there) and one more packet in flight.
_SOCKET_BYTES = 208 * 1024 + 64 * 1024
# Rounds of "stop what is new" before giving up on a sandbox that keeps forking.
_STOP_ROUNDS = 50
# How long the processes of one round may take to stop (a thread may be deep in a syscall).
_STOP_WAIT_S = 0.5


def _task_margin(limit: int) -> int:
    """RLIMIT_NPROC stops the sandbox at ``limit`` tasks exactly; the host's count, taken
    while processes come and go, can fall short of it. Within this margin it is a hit."""
    return limit // 8


@dataclass(frozen=True, slots=True)
class Usage:
    cpu_seconds: float
    tasks: int | None  # None where the kernel caps the tasks itself
    memory_bytes: int | None  # None where the kernel enforces the memory limit itself
    processes_hit: bool
    memory_hit: bool
    workspace_inodes: int


class SandboxMeter:
    """Reads one sandbox from the host. ``bind`` is called once its guest is running."""

    kernel_enforced = False
    # The guest's /proc files held from ``bind``: the ones read after every execution.
    guest_files: tuple[str, ...] = ("stat", "children", "status", "schedstat", "syscall")

    def __init__(self, limits: Limits, mounts: tuple[str, ...] = TMPFS_MOUNTS) -> None:
        self.limits = limits
        # The sandbox's tmpfs mounts, seen through /proc/<guest>/root (none: no sandbox).
        self.mounts = mounts
        self.guest_pid: int | None = None
        self.pidns: str | None = None
        # The stopped processes besides the guest, by pid: a pidfd of each, held until they
        # are resumed.
        self._stopped: dict[int, int] = {}
        self._stopped_lock = threading.Lock()  # ``release`` may come from another thread
        self._cpu_high = 0.0
        # The guest's own pidfd and /proc files, held from ``bind`` to ``release``: stopping a
        # guest that is the sandbox's only task then costs a signal and two reads.
        self.held = HeldFiles()
        self._guest_fd: int | None = None
        self._guest_stopped = False

    def bind(self, guest_pid: int) -> None:
        self.guest_pid = guest_pid
        self.pidns = pidns_of(guest_pid)
        try:
            fd = os.pidfd_open(guest_pid)
        except OSError:
            return
        # Checked after the pidfd is open: the pidfd, the files and the check concern the
        # same process, never one that got its pid later.
        try:
            for name in self.guest_files:
                self.held.read(self._guest_path(name))
            self.guest_memory(0, 0)  # opens it
            same = self.pidns is not None and pidns_of(guest_pid) == self.pidns
        except OSError:
            same = False
        if same:
            self._guest_fd = fd
        else:
            os.close(fd)
            self.held.close()

    def guest_memory(self, address: int, size: int) -> bytes:
        """``size`` bytes of the guest's memory at ``address``, through its held
        /proc/<pid>/mem (OSError when it cannot be read)."""
        return self.held.read_at(self._guest_path("mem"), address, size)

    def _guest_path(self, name: str) -> str:
        pid = self.guest_pid
        return f"/proc/{pid}/task/{pid}/children" if name == "children" else f"/proc/{pid}/{name}"

    def usage(self) -> Usage:
        raise NotImplementedError

    def cpu_seconds(self) -> float:
        return self.usage().cpu_seconds

    def stop(self, *, bridge_fd: int | None = None) -> bool:
        """Stop every task of the sandbox (nothing of its code runs until ``resume``).
        False when it could not be done (the sandbox must then be killed). A guest that waits
        for ``bridge_fd`` (the caller saw it there) and provably cannot run until
        its next frame is left asleep instead, no signal sent: see ``resting``."""
        return self._signal_stop(bridge_fd)

    def resume(self) -> None:
        self._signal_resume()

    def kill(self) -> None:
        """SIGKILL the guest, the pid 1 of its namespace: the kernel ends every process in
        it. Safe to call from any thread."""
        if self.guest_pid is not None and self.pidns is not None:
            signal_each([self.guest_pid], self.pidns, signal.SIGKILL)

    def release(self) -> None:
        """Free what the meter holds on the host (pidfds; cgroup directories)."""
        with self._stopped_lock:
            held, self._stopped = self._stopped, {}
            guest_fd, self._guest_fd = self._guest_fd, None
            self._guest_stopped = False
        for fd in [*held.values(), *([] if guest_fd is None else [guest_fd])]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.held.close()

    # --- shared readings ------------------------------------------------------------------

    def _procs_cpu(self) -> tuple[float, int, int]:
        """(CPU seconds of every process that ever ran, tasks, resident bytes)."""
        if self.guest_pid is None or self.pidns is None:
            return self._cpu_high, 0, 0
        alone = self._guest_alone()
        procs = [alone] if alone is not None else walk(self.guest_pid, self.pidns)
        cpu = sum(p.cpu_seconds for p in procs)
        # Monotonic: a child reaped between two reads moves from its own line to its
        # parent's cutime, and may be missed once.
        self._cpu_high = max(self._cpu_high, cpu)
        return self._cpu_high, sum(p.threads for p in procs), sum(p.rss_bytes for p in procs)

    def _guest_alone(self) -> Proc | None:
        """The guest, read from its held files, when it is the sandbox's only task (one
        thread, no child: the common case); None when the tree must be walked."""
        if self._guest_fd is None:
            return None
        assert self.guest_pid is not None
        try:
            if self.held.read(self._guest_path("children")).strip():
                return None
            stat = self.held.read(self._guest_path("stat"))
            proc = parse_proc(self.guest_pid, stat, self.held.read(self._guest_path("status")))
        except (OSError, IndexError, ValueError):
            return None
        return proc if proc.threads == 1 else None

    def _statvfs(self, mount: str) -> os.statvfs_result | None:
        if self.guest_pid is None:
            return None
        try:
            return self.held.statvfs(f"/proc/{self.guest_pid}/root{mount}")
        except OSError:
            return None

    def workspace_inodes(self) -> int:
        st = self._statvfs(WORKSPACE) if WORKSPACE in self.mounts else None
        return 0 if st is None else st.f_files - st.f_ffree

    def socket_bytes(self) -> int:
        """What the sandbox's sockets may hold queued in the kernel: a default send buffer
        for each (only AF_UNIX sockets exist inside; their sizes cannot be raised there)."""
        if self.guest_pid is None:
            return 0
        try:
            listing = self.held.read(self._guest_path("net/unix"))
            sockets = listing.count("\n") - 1  # its first line is a header
        except OSError:
            return 0
        return max(sockets, 0) * _SOCKET_BYTES

    def tmpfs_bytes(self) -> int:
        """Memory the tmpfs mounts hold: their pages, and the kernel's own memory for each of
        their inodes (none of it in any process's RSS, nor in a tmpfs's block count)."""
        total = 0
        for mount in self.mounts:
            st = self._statvfs(mount)
            if st is not None:
                total += (st.f_blocks - st.f_bfree) * st.f_frsize
                total += (st.f_files - st.f_ffree) * _INODE_BYTES
        return total

    def _signal_stop(self, bridge_fd: int | None = None) -> bool:
        if self.guest_pid is None or self.pidns is None:
            return True
        with self._stopped_lock:
            if self._guest_fd is not None and not self._guest_stopped:
                if bridge_fd is not None and self._rests(bridge_fd):
                    return True
                if self._stop_alone():
                    return True
            stopped = set(self._stopped)
            if self._guest_stopped:
                stopped.add(self.guest_pid)
                wait_stopped([self.guest_pid], _STOP_WAIT_S)
            for _ in range(_STOP_ROUNDS):
                # A stopped process forks no more, so this converges.
                new = [pid for pid in tree(self.guest_pid, self.pidns) if pid not in stopped]
                if not new:
                    return True
                reached = stop_each(new, self.pidns)
                self._stopped.update(reached)
                stopped.update(new)
                # Look for new children only once these have stopped: a fork already under
                # way when the signal came completes, and shows its child only then.
                wait_stopped(list(reached), _STOP_WAIT_S)
        return False

    def rests(self, bridge_fd: int) -> bool:
        """Is the guest alone, asleep in its wait for ``bridge_fd``, unable to run until its
        next frame (``resting``)? Then the sandbox needs no stop: nothing of it can run."""
        if self.guest_pid is None:
            return False
        with self._stopped_lock:
            return self._guest_fd is not None and not self._guest_stopped and self._rests(bridge_fd)

    def _rests(self, bridge_fd: int) -> bool:
        assert self.guest_pid is not None
        return rests_alone(self.held.read, self.guest_memory, self.guest_pid, bridge_fd)

    def _stop_alone(self) -> bool:
        """Stop the guest through its held pidfd. True when that stopped the whole sandbox:
        the guest has one thread and no child (read once it has stopped, as the walk does: a
        fork under way when the signal came completes first, its child seen only then). False
        leaves the rest to the walk, the guest already signalled."""
        assert self._guest_fd is not None and self.guest_pid is not None
        try:
            send_signal(self._guest_fd, signal.SIGSTOP)
        except OSError:
            return False  # it has ended: the walk finds nothing to stop
        self._guest_stopped = True
        if not wait_stopped([self.guest_pid], _STOP_WAIT_S):
            return False
        try:
            threads = int(self.held.read(self._guest_path("stat")).rsplit(")", 1)[1].split()[17])
            children = self.held.read(self._guest_path("children")).split()
        except (OSError, ValueError, IndexError):
            return False
        return threads == 1 and not children

    def _signal_resume(self) -> None:
        with self._stopped_lock:
            held, self._stopped = self._stopped, {}
            if self._guest_stopped and self._guest_fd is not None:
                with contextlib.suppress(OSError):  # it has ended meanwhile (killed)
                    send_signal(self._guest_fd, signal.SIGCONT)
            self._guest_stopped = False
        continue_each(held)


class ProcMeter(SandboxMeter):
    """No cgroups: the host measures the process tree and its tmpfs mounts."""

    guest_files = (*SandboxMeter.guest_files, "net/unix")

    def cpu_seconds(self) -> float:
        return self._procs_cpu()[0]

    def usage(self) -> Usage:
        cpu, tasks, resident = self._procs_cpu()
        kernel = self.tmpfs_bytes() + self.socket_bytes()
        memory = resident + kernel
        if memory > self.limits.memory_bytes and self.guest_pid is not None and self.pidns:
            # Pages shared after a fork counted once per process: confirm with the costly,
            # proportional reading before calling it a breach.
            procs = walk(self.guest_pid, self.pidns)
            memory = sum(pss_bytes(p.pid) for p in procs) + kernel
        return Usage(
            cpu_seconds=cpu,
            tasks=tasks,
            memory_bytes=memory,
            processes_hit=tasks >= self.limits.processes - _task_margin(self.limits.processes),
            memory_hit=False,
            workspace_inodes=self.workspace_inodes(),
        )


class CgroupMeter(SandboxMeter):
    """The sandbox's own cgroups; the kernel enforces memory and tasks."""

    kernel_enforced = True

    def __init__(
        self, limits: Limits, cgroup: CgroupSet, mounts: tuple[str, ...] = TMPFS_MOUNTS
    ) -> None:
        super().__init__(limits, mounts)
        self.cgroup = cgroup
        self._counts_cpu = cgroup.version == 2 or "cpuacct" in cgroup.dirs

    def cpu_seconds(self) -> float:
        return self.cgroup.cpu_seconds() if self._counts_cpu else self._procs_cpu()[0]

    def usage(self) -> Usage:
        cgroup = self.cgroup
        cpu = self.cpu_seconds()
        return Usage(
            cpu_seconds=cpu,
            tasks=None,
            memory_bytes=None,
            processes_hit=cgroup.pids_limit_hit(),
            memory_hit=cgroup.memory_limit_hit(),
            workspace_inodes=self.workspace_inodes(),
        )

    def kill(self) -> None:
        self.cgroup.kill_all()
        super().kill()

    def release(self) -> None:
        super().release()
        with contextlib.suppress(OSError):
            self.cgroup.destroy()

"""What the runner learns about a running guest from the host it runs on, and does to it there.

A local guest is read from this machine's /proc (``ProcFacts``); a guest on another node is
asked over its stream (``codemode.cluster``), where the worker answers with ``ProcFacts``.
The runner never reads /proc itself, so it runs unchanged over either.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import struct
import termios
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from codemode.errors import SandboxError
from codemode.sandbox.layout import WORKSPACE
from codemode.sandbox.settle import waits_for_frames
from codemode.sandbox.workspace import Snapshot, scan

if TYPE_CHECKING:
    from codemode.sandbox.meter import SandboxMeter

__all__ = ["GuestFacts", "LocalGuest", "Parked", "ProcFacts", "WorkspaceScan", "unread_bytes"]


@dataclass(frozen=True, slots=True)
class WorkspaceScan:
    """The workspace as the host listed it (never as the guest reported it)."""

    snapshot: Snapshot
    capped: bool  # the scan stopped at its caps
    used_bytes: int | None  # bytes its private tmpfs holds (None: a host directory)


@dataclass(frozen=True, slots=True)
class Parked:
    """A guest between executions: was it idle, is every task stopped, and its files."""

    idle: bool  # its main thread waited in its read of the bridge, as an honest guest does
    stopped: bool  # no task can run: stopped, or resting (False: they kept starting new ones)
    files: WorkspaceScan | None  # listed while stopped (None: not stopped, or not listable)


class GuestFacts(Protocol):
    """Host-side facts about one guest, and what is done to it there besides killing."""

    def park(self) -> Parked:
        """Between executions: wait (50 ms of its CPU at most) for the guest's main thread to
        block in its read of the bridge (code that sent its own "done" is elsewhere), stop
        every task of the sandbox, and list the workspace while it is stopped. One step, so a
        remote guest costs one round trip."""
        ...

    def unread_bytes(self) -> int:
        """Bytes sent to the guest's bridge that it has not read yet (1 when unknown)."""
        ...

    def interrupt(self) -> None:
        """SIGINT to the guest (a KeyboardInterrupt in the code)."""
        ...

    def list_workspace(self) -> WorkspaceScan | None:
        """Every file of the workspace, listed by the host while the sandbox is stopped
        (None when it cannot be listed)."""
        ...


def unread_bytes(sock: socket.socket) -> int:
    """Bytes sent on ``sock`` that the peer has not read yet (SIOCOUTQ)."""
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4)
    except OSError:
        return 1
    return int(struct.unpack("i", raw)[0])


class LocalGuest(Protocol):
    """What ``ProcFacts`` reads of a guest process on this machine (a ``SandboxProcess``)."""

    sock: socket.socket  # the host end of the bridge
    isolated: bool
    meter: SandboxMeter
    bridge_fd: int | None  # the bridge's descriptor number inside the guest

    @property
    def guest_pid(self) -> int | None: ...

    def open_workspace(self) -> int:
        """A directory descriptor of the workspace, opened without following links."""
        ...


class ProcFacts:
    """``GuestFacts`` of a guest on this machine, read from /proc."""

    def __init__(self, process: LocalGuest) -> None:
        self.process = process

    def park(self) -> Parked:
        meter = self.process.meter
        bridge_fd = self.process.bridge_fd
        # The usual case, an honest guest already in its wait, proven at the first look.
        if bridge_fd is not None and meter.rests(bridge_fd):
            return Parked(True, True, self.list_workspace())
        # Read before the stop: a task on its way to stopping shows no syscall.
        idle = waits_for_frames(
            self.process.guest_pid, bridge_fd, meter.held.read, meter.guest_memory
        )
        if not meter.stop(bridge_fd=bridge_fd if idle else None):
            return Parked(idle, False, None)
        return Parked(idle, True, self.list_workspace() if idle else None)

    def unread_bytes(self) -> int:
        return unread_bytes(self.process.sock)

    def interrupt(self) -> None:
        pid = self.process.guest_pid
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGINT)

    def list_workspace(self) -> WorkspaceScan | None:
        empty = self._empty_workspace()
        if empty is not None:
            return empty
        try:
            root = self.process.open_workspace()
        except (OSError, SandboxError):
            return None
        try:
            snapshot, capped = scan(root)
            usage = os.fstatvfs(root)
        finally:
            os.close(root)
        if not self.process.isolated:
            return WorkspaceScan(snapshot, capped, None)  # the host's disk, not a tmpfs
        return WorkspaceScan(snapshot, capped, (usage.f_blocks - usage.f_bfree) * usage.f_frsize)

    def _empty_workspace(self) -> WorkspaceScan | None:
        """The workspace when its tmpfs holds no inode but its root: nothing to list, known
        from one statfs of a held descriptor (no directory opened and read). None otherwise."""
        pid = self.process.guest_pid
        if not self.process.isolated or pid is None:
            return None
        try:
            usage = self.process.meter.held.statvfs(f"/proc/{pid}/root{WORKSPACE}")
        except OSError:
            return None
        # Exactly the root: a filesystem that reports no inode counts (0 of 0) is not known
        # to be empty.
        if usage.f_files == 0 or usage.f_files - usage.f_ffree != 1:
            return None
        return WorkspaceScan({}, False, (usage.f_blocks - usage.f_bfree) * usage.f_frsize)

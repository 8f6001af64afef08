"""A started guest as the host holds it, and the seams every sandbox backend implements.

``GuestProcess`` is what the runner holds of a started guest: its bridge socket and output
pipes, the meter that reads and stops it, and the host-side facts about it (``GuestFacts``).
``SandboxProcess`` is a guest on this machine; a guest on another node is held the same way
(``codemode.cluster``), so the runner's framing, caps and tool calls stay on the gateway.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from codemode.egress.proxy import EgressGate
from codemode.errors import SandboxError
from codemode.sandbox.facts import GuestFacts, ProcFacts
from codemode.sandbox.meter import SandboxMeter
from codemode.sandbox.proctree import children_of
from codemode.sandbox.workspace import open_workspace
from codemode.settings.sandbox import Limits

__all__ = ["GuestProcess", "ProcessHandle", "SandboxBackend", "SandboxProcess"]


@dataclass
class SandboxProcess:
    """A running guest: its process, the host end of the bridge, its output pipes and the
    meter that reads (and stops, and kills) everything it runs."""

    popen: ProcessHandle
    sock: socket.socket
    stdout_fd: int
    stderr_fd: int
    isolated: bool
    meter: SandboxMeter
    workspace: Path | None = None  # host path; only for the unsafe backend
    # The guest's own RLIMIT_NPROC, set once it runs in its user namespace (None: not set).
    task_limit: int | None = None
    # The bridge's descriptor number inside the guest (where an idle guest waits).
    bridge_fd: int | None = None
    # Its way out through the egress proxy (None: no network, the default).
    egress: EgressGate | None = None
    # The process held is the guest itself (forked from a template), not bwrap around it.
    pid_is_guest: bool = False
    _cleanups: list[Callable[[], None]] = field(default_factory=list)
    _facts: ProcFacts | None = field(default=None, repr=False)
    # Two threads may kill the same sandbox (a pool's close, a session's release): what is
    # closed is taken out under this lock, so no descriptor is closed twice (a number closed
    # twice may by then be another sandbox's pidfd or socket).
    _releasing: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def facts(self) -> ProcFacts:
        if self._facts is None:
            self._facts = ProcFacts(self)
        return self._facts

    def wait_exit(self, timeout_s: float) -> None:
        """Wait (bounded) for the sandbox's process to exit."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=timeout_s)

    @property
    def guest_pid(self) -> int | None:
        """The guest interpreter's pid on the host (known once it said it is ready)."""
        return self.meter.guest_pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def attach(self) -> None:
        """The guest is running: find its host pid (bwrap's child, or the process itself),
        point the meter at it and cap its tasks. Nothing of the code has run yet."""
        direct = self.pid_is_guest or not self.isolated
        children = [self.popen.pid] if direct else children_of(self.popen.pid)
        if not children:
            raise SandboxError("the sandbox's guest process is gone")
        guest = children[0]
        self.meter.bind(guest)
        if self.task_limit is not None:
            # Inside its own user namespace only the sandbox's tasks count against this
            # limit: the user's other processes on the host do not.
            try:
                resource.prlimit(guest, resource.RLIMIT_NPROC, (self.task_limit,) * 2)
            except OSError as error:
                raise SandboxError(
                    f"could not cap the sandbox's processes: {error}",
                    fix="report this: the host must be allowed to set rlimits on its sandboxes",
                ) from error

    def open_workspace(self) -> int:
        """A directory descriptor of the workspace, opened without following links."""
        if self.workspace is not None:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            return os.open(self.workspace, flags)
        if self.guest_pid is None:
            raise SandboxError("the sandbox has not started yet")
        return open_workspace(self.guest_pid)

    def kill(self) -> None:
        """Kill every process of the sandbox and release everything it held. Idempotent.

        The sandbox's pid 1 (the guest) is killed first, which ends its whole pid namespace;
        bwrap outside then reaps it and exits. Killing bwrap first would orphan pid 1 to the
        host's init, which may never reap it (a zombie left behind).
        """
        if self.pid_is_guest:
            self.meter.kill()
            self.popen.kill()
        elif self.popen.poll() is None:
            self.meter.kill()
            children = children_of(self.popen.pid)
            for child in children:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(child, signal.SIGKILL)
            try:
                # bwrap exits as soon as its child does; with no child yet, do not wait.
                self.popen.wait(timeout=2 if children or self.guest_pid else 0.05)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.popen.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)
        self.meter.release()
        with self._releasing:
            fds, self.stdout_fd, self.stderr_fd = (self.stdout_fd, self.stderr_fd), -1, -1
        for fd in fds:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.sock.close()
        if self.egress is not None:
            self.egress.close()
        while True:
            with self._releasing:
                if not self._cleanups:
                    return
                cleanup = self._cleanups.pop()
            cleanup()


class ProcessHandle(Protocol):
    """The process a ``SandboxProcess`` holds: a ``subprocess.Popen`` (bwrap, or the guest
    without isolation) or a guest forked from a template (``template.ForkedGuest``)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


class GuestProcess(Protocol):
    """A started guest as the runner holds it, wherever it runs."""

    sock: socket.socket  # the host end of the bridge
    stdout_fd: int
    stderr_fd: int
    isolated: bool
    meter: SandboxMeter
    workspace: Path | None  # a host directory chosen as the workspace
    egress: EgressGate | None  # its way out through the egress proxy (None: no network)

    @property
    def guest_pid(self) -> int | None:
        """The guest's pid on this machine (None: it runs elsewhere)."""
        ...

    @property
    def facts(self) -> GuestFacts: ...

    def alive(self) -> bool: ...

    def attach(self) -> None:
        """The guest said it is ready: bind the meter to it and cap its tasks."""
        ...

    def wait_exit(self, timeout_s: float) -> None: ...

    def kill(self) -> None:
        """Kill every process of the sandbox and release what it held. Idempotent."""
        ...


class SandboxBackend(Protocol):
    """Starts guests. ``isolated`` is False only for the explicitly unsafe backend."""

    isolated: bool
    limits: Limits

    def spawn(self) -> SandboxProcess: ...

    def rest(self) -> None:
        """None of its sandboxes runs and none is wanted for a while: give back what it
        keeps ready for the next start (the template, which the next start launches again).
        Called only while no start is under way."""
        ...

"""Sandboxes forked from one template, copy-on-write, instead of one bubblewrap each.

The template is a guest interpreter started once in a bubblewrap of its own, with the guest's
modules loaded (``guest/template.py`` says how each fork makes itself a sandbox). A new sandbox
is then a fork, not a process the gateway forks and execs: no fork of the gateway (whose setup
between fork and exec holds the GIL for milliseconds), no interpreter start-up, and the pages
of the interpreter and its modules shared by every idle sandbox until one writes to them.

Per sandbox, the host hands the template descriptors over a ``SOCK_SEQPACKET`` control
socket: the guest's end of the bridge, its stdout and stderr pipes, a report socket, and the
sandbox's ``cgroup.procs`` files opened for writing (the fork joins its cgroups through them).
Once sealed (capabilities dropped, seccomp on), the guest says so on the report socket; the
kernel adds its credentials, so the host learns its pid as the host sees it, and holds it by
a pidfd.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import struct
import subprocess
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from codemode.errors import SandboxError, TemplateUnavailableError
from codemode.sandbox.bwrap_parts import MASKED_PROC, SIGNALS_PENDING
from codemode.sandbox.pidsignal import send_signal
from codemode.settings.sandbox import Limits

__all__ = [
    "BRIDGE_FD",
    "ForkedGuest",
    "SandboxTemplate",
    "TemplateUnavailableError",
    "template_args",
]

log = logging.getLogger(__name__)

# Where the bridge lands in every forked guest (``guest/template.py`` agrees).
BRIDGE_FD = 3
_UCRED = struct.Struct("iII")
# How long a killed guest may stay in the process table (the kernel reaps the template's
# children as they end: a moment on a loaded machine).
_REAP_WAIT_S = 2.0


# The kernel directories of /proc each fork shows read-only (bwrap's own list), beside the
# files it masks.
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")


def template_args(
    limits: Limits, tmpfs_sizes: dict[str, int], control_fd: int, seccomp_fd: int
) -> list[str]:
    """The template's arguments: what each fork makes of itself (``guest/template.py``)."""
    args = ["--control", str(control_fd), "--seccomp", str(seccomp_fd)]
    args += ["--uid", "1000", "--gid", "1000", "--hostname", "sandbox"]
    for mount, size in tmpfs_sizes.items():
        args += ["--tmpfs", f"{mount}={size}"]
    for name in _PROC_READ_ONLY:
        args += ["--proc-ro", name]
    for name in MASKED_PROC:
        args += ["--proc-mask", name]
    rlimits = {
        "RLIMIT_CORE": 0,
        "RLIMIT_NOFILE": limits.open_files,
        "RLIMIT_AS": limits.memory_bytes,
        "RLIMIT_SIGPENDING": SIGNALS_PENDING,
    }
    for name, value in rlimits.items():
        args += ["--rlimit", f"{name}={value}"]
    return args


def _has_exited(pidfd: int, timeout: float | None = 0.0) -> bool:
    """The process held by ``pidfd`` has exited, or does within ``timeout`` seconds (None:
    wait for it); -1 holds none, so it counts as exited."""
    if pidfd < 0:
        return True
    # poll(2), not select(2): a gateway with many sandboxes holds pidfds past 1,023.
    waiter = select.poll()
    waiter.register(pidfd, select.POLLIN)
    return bool(waiter.poll(None if timeout is None else max(timeout, 0.0) * 1000))


def _unreaped(pid: int) -> bool:
    """Still a zombie in the process table (its pidfd said it exited)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b") ")[2][:1] == b"Z"
    except OSError:
        return False


class ForkedGuest:
    """A guest the template forked: not a child of the gateway, so held by a pidfd. Its exit
    status is the template's to read; ``returncode`` is -1 once it is gone."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self._pidfd = pidfd
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self._pidfd >= 0 and _has_exited(self._pidfd):
            self.returncode = -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait until it exited and the template reaped it (a moment later: nothing of the
        sandbox is left once this returns)."""
        if self.poll() is None:
            if not _has_exited(self._pidfd, timeout):
                raise subprocess.TimeoutExpired(f"sandbox {self.pid}", timeout or 0.0)
            self.returncode = -1
        deadline = time.monotonic() + _REAP_WAIT_S
        while self._pidfd >= 0 and _unreaped(self.pid) and time.monotonic() < deadline:
            time.sleep(0.001)
        return -1

    @property
    def running(self) -> bool:
        """Not known to have exited, and still held (a closed guest was killed first)."""
        return self._pidfd >= 0 and self.poll() is None

    def kill(self) -> None:
        """SIGKILL the guest, pid 1 of its namespace: the kernel ends every process in it."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                send_signal(self._pidfd, signal.SIGKILL)

    def close(self) -> None:
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1


@dataclass
class Forked:
    """What one fork gives the host: the guest, the bridge's host end, its output pipes."""

    guest: ForkedGuest
    sock: socket.socket
    stdout_fd: int
    stderr_fd: int


def _opened_for_joining(cgroup_procs: list[str], closer: contextlib.ExitStack) -> list[int]:
    """The ``cgroup.procs`` files of a new sandbox, open for writing, each closed by
    ``closer``. The fork writes ``0`` (itself) to each before its guest starts: the kernel
    checks the right to move it with the credentials of whoever opened the file, here, so no
    round trip to the host is needed."""
    opened: list[int] = []
    for path in cgroup_procs:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        except OSError as error:
            raise SandboxError(
                f"could not open the sandbox's cgroup {path}: {error.strerror}",
                fix="check that the gateway may write to its cgroups",
            ) from error
        closer.callback(os.close, fd)
        opened.append(fd)
    return opened


def _pipe(
    reader_stack: contextlib.ExitStack, writer_stack: contextlib.ExitStack
) -> tuple[int, int]:
    """A pipe whose ends the two stacks close."""
    reader, writer = os.pipe()
    reader_stack.callback(os.close, reader)
    writer_stack.callback(os.close, writer)
    return reader, writer


def _sender_pid(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid: int = _UCRED.unpack_from(data)[0]
            return pid
    return None


def _read_tail(fd: int, limit: int = 2000) -> str:
    """What a pipe holds now (the writer has closed it or said what it will)."""
    chunks = []
    os.set_blocking(fd, False)
    with contextlib.suppress(OSError):
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace").strip()[-limit:]


class SandboxTemplate:
    """One template process and the forks it makes. ``launch`` starts the template's
    bubblewrap with the child end of the control socket (its number as the argument) and
    returns the process; it is called from a thread that lives as long as the template (the
    parent-death signal is the starting thread's)."""

    def __init__(
        self,
        launch: Callable[[int], subprocess.Popen[bytes]],
        *,
        start_timeout_s: float = 15.0,
    ) -> None:
        # Weakly: the backend that owns this template must stay collectable (its finalizer
        # stops the template).
        self._launch: Callable[[], Callable[[int], subprocess.Popen[bytes]] | None] = (
            weakref.WeakMethod(launch) if hasattr(launch, "__self__") else (lambda: launch)
        )
        self._start_timeout_s = start_timeout_s
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._popen: subprocess.Popen[bytes] | None = None
        # Whether the template runs is read from a pidfd, not Popen.poll(): poll() answers
        # None while the thread in communicate() holds the lock around waitpid, so a template
        # just killed could be taken for a live one.
        self._pidfd = -1
        # Forks under way, and the guests forked (weakly: a guest dropped was stopped), so
        # that ``rest`` never stops a template a sandbox still needs.
        self._forking = 0
        self._forks: weakref.WeakSet[ForkedGuest] = weakref.WeakSet()

    @property
    def pid(self) -> int | None:
        """The template's bubblewrap (None: not started)."""
        return self._popen.pid if self._popen is not None else None

    def _running(self) -> socket.socket:
        """The control socket of a running template, one more fork counted under way."""
        with self._lock:
            if self._control is None or _has_exited(self._pidfd):
                if self._popen is not None:
                    log.warning("the sandbox template exited; starting a new one")
                self._control = self._start()
            self._forking += 1
            return self._control

    def _start(self) -> socket.socket:
        launch = self._launch()
        if launch is None:
            raise TemplateUnavailableError(
                "the sandbox backend is gone", fix="start sandboxes from a live backend"
            )
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        box: dict[str, object] = {"launch": launch, "fd": child.fileno()}
        started, exited = threading.Event(), threading.Event()
        del launch
        threading.Thread(
            target=_keep, args=(box, started, exited), name="codemode-template", daemon=True
        ).start()
        started.wait()
        child.close()
        error = box.get("error")
        if isinstance(error, BaseException):
            host.close()
            raise TemplateUnavailableError(
                f"could not start the sandbox template: {error}",
                fix="check that bwrap runs here: `bwrap --ro-bind / / true`",
            )
        popen = box["popen"]
        assert isinstance(popen, subprocess.Popen)
        host.settimeout(self._start_timeout_s)
        try:
            said = host.recv(16)
        except OSError:
            said = b""
        if said != b"ready":
            host.close()
            with contextlib.suppress(OSError):
                popen.kill()
            exited.wait(5)
            message = str(box.get("stderr", "")).strip()[-1000:]
            raise TemplateUnavailableError(
                f"the sandbox template did not start: {message or 'no message'}",
                fix="sandboxes start one bubblewrap each instead; set sandbox.template = false "
                "to say so and silence this",
            )
        host.settimeout(None)
        self._close_pidfd()
        self._popen = popen
        with contextlib.suppress(OSError):  # gone already: the next fork starts a new one
            self._pidfd = os.pidfd_open(popen.pid)
        return host

    def _close_pidfd(self) -> None:
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1

    def fork(self, cgroup_procs: list[str], timeout_s: float) -> Forked:
        """A new sandbox from the template; ``cgroup_procs`` are the ``cgroup.procs`` files
        of its cgroups (empty: none), which it joins before its guest starts."""
        control = self._running()
        forked: Forked | None = None
        try:
            forked = self._fork(control, cgroup_procs, timeout_s)
            return forked
        finally:
            with self._lock:
                self._forking -= 1
                if forked is not None:
                    self._forks.add(forked.guest)

    def _fork(self, control: socket.socket, cgroup_procs: list[str], timeout_s: float) -> Forked:
        from codemode.sandbox.launch import bridge_socketpair

        # Every end is closed on the way out of a failure, whichever step failed (a process
        # out of descriptors fails at any of them); the host's own ends stay open on success.
        with contextlib.ExitStack() as host_ends, contextlib.ExitStack() as report_end:
            # The fork's ends are closed once sent: its report end above all, or the report
            # socket would not end when the fork dies before it says anything.
            with contextlib.ExitStack() as fork_ends:
                joins = _opened_for_joining(cgroup_procs, fork_ends)
                try:
                    host_sock, guest_sock = bridge_socketpair()
                    host_ends.enter_context(host_sock)
                    fork_ends.enter_context(guest_sock)
                    stdout_r, stdout_w = _pipe(host_ends, fork_ends)
                    stderr_r, stderr_w = _pipe(host_ends, fork_ends)
                    report, report_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                    report_end.enter_context(report)
                    fork_ends.enter_context(report_child)
                    report.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
                except OSError as error:
                    raise SandboxError(
                        f"could not make the new sandbox's pipes and sockets: {error}",
                        fix="raise the gateway's limit of open files (`ulimit -n`) "
                        "or run fewer sessions at once",
                    ) from error
                sent = [guest_sock.fileno(), stdout_w, stderr_w, report_child.fileno(), *joins]
                try:
                    socket.send_fds(control, [b"fork"], sent)
                except OSError as error:
                    raise SandboxError(
                        f"the sandbox template is gone: {error}", fix="retry: a new template starts"
                    ) from error
            report.settimeout(timeout_s)
            pid = self._sealed(report, stderr_r)
            pidfd = os.pidfd_open(pid)
            host_ends.pop_all()
        return Forked(ForkedGuest(pid, pidfd), host_sock, stdout_r, stderr_r)

    def _receive(self, report: socket.socket, stderr_fd: int, step: str) -> tuple[bytes, int]:
        try:
            data, ancillary, _, _ = report.recvmsg(16, socket.CMSG_SPACE(_UCRED.size))
        except TimeoutError:
            data, ancillary = b"", []
        pid = _sender_pid(ancillary)
        if not data or pid is None:
            raise SandboxError(
                f"the sandbox did not start ({step}): {_read_tail(stderr_fd) or 'no message'}",
                fix="run `codemode exec -` with `print(1)` to see the full error; "
                "sandbox.template = false starts each sandbox in a bubblewrap of its own",
            )
        return data, pid

    def _sealed(self, report: socket.socket, stderr_fd: int) -> int:
        data, pid = self._receive(report, stderr_fd, "sealing itself")
        if data != b"sealed":
            raise SandboxError(f"the sandbox template said {data!r}", fix="report this")
        return pid

    def rest(self) -> bool:
        """Stop the template if no fork is under way and no sandbox it forked runs (an idle
        gateway: 11 MiB of RSS back). True when it was stopped; a later ``fork`` starts a
        new one."""
        with self._lock:
            if self._forking or any(guest.running for guest in self._forks):
                return False
            stopped = self._detach()
        self._stop(*stopped)
        return stopped[0] is not None

    def close(self) -> None:
        """Stop the template (its pid namespace ends with it, and every sandbox it forked).
        A later ``fork`` starts a new one."""
        with self._lock:
            stopped = self._detach()
        self._stop(*stopped)

    def _detach(self) -> tuple[socket.socket | None, subprocess.Popen[bytes] | None]:
        """Take the running template out of use (lock held)."""
        control, self._control = self._control, None
        popen, self._popen = self._popen, None
        self._close_pidfd()
        return control, popen

    def _stop(self, control: socket.socket | None, popen: subprocess.Popen[bytes] | None) -> None:
        if control is not None:
            control.close()  # the template exits when its control socket closes
        if popen is not None:
            try:
                popen.wait(timeout=2)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    popen.kill()


def _keep(box: dict[str, object], started: threading.Event, exited: threading.Event) -> None:
    """Start the template and stay as long as it runs: the parent-death signal that ends it
    with the gateway is this thread's. Drains its stderr (read when it fails to start)."""
    launch = box.pop("launch")
    assert callable(launch)
    try:
        popen = launch(box["fd"])
    except BaseException as error:  # noqa: BLE001 - handed to the starting thread
        box["error"] = error
        started.set()
        return
    del launch
    box["popen"] = popen
    started.set()
    try:
        _, stderr = popen.communicate()
        box["stderr"] = (stderr or b"").decode(errors="replace")
    finally:
        exited.set()

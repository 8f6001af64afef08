"""Sandbox backends: how a guest interpreter is started, isolated and killed.

``BwrapBackend`` (in ``bwrap.py``) is the default and the only isolated one.
``UnsafeHostBackend`` runs the same guest as a plain child process with no isolation at all,
for debugging trusted code; its name says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import weakref
from pathlib import Path

from codemode.sandbox.bwrap import BwrapBackend, find_bwrap
from codemode.sandbox.launch import (
    BOOTSTRAP,
    GUEST_DIR,
    bridge_socketpair,
    default_python_paths,
    dies_with_parent,
    host_workspace,
    interpreter,
    take_output_pipes,
)
from codemode.sandbox.layout import GUEST_PACKAGE
from codemode.sandbox.meter import ProcMeter
from codemode.sandbox.process import SandboxBackend, SandboxProcess
from codemode.sandbox.proctree import children_of
from codemode.settings.sandbox import SandboxSettings

__all__ = [
    "BwrapBackend",
    "SandboxBackend",
    "SandboxProcess",
    "UnsafeHostBackend",
    "children_of",
    "find_bwrap",
    "make_backend",
]

log = logging.getLogger(__name__)


def make_backend(settings: SandboxSettings, *, workspace: Path | None = None) -> SandboxBackend:
    """``workspace``: a host directory every sandbox of this backend works in (the code starts
    there and the files it writes land there) instead of a private tmpfs."""
    if settings.unsafe_no_isolation:
        return UnsafeHostBackend(settings, workspace=workspace)
    return BwrapBackend(settings, workspace=workspace)


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
        self.workspace = host_workspace(workspace)
        if self.settings.network.enabled:
            log.warning(
                "[sandbox.network] allow has no effect without isolation: the code has all "
                "of the host's network (sandbox.unsafe_no_isolation is on)"
            )
        self._root = Path(tempfile.mkdtemp(prefix="codemode-unsafe-"))
        (self._root / GUEST_PACKAGE).symlink_to(GUEST_DIR)
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self._root), True)

    def rest(self) -> None:
        return None  # it keeps nothing ready

    def spawn(self) -> SandboxProcess:
        host_sock, guest_sock = bridge_socketpair()
        chosen = self.workspace
        workspace = chosen or Path(tempfile.mkdtemp(prefix="codemode-ws-"))
        paths = self.settings.python_paths or default_python_paths()
        args = [interpreter(), "-I", "-S", "-B", "-c", BOOTSTRAP.format(root=str(self._root))]
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
                preexec_fn=dies_with_parent(),  # noqa: PLW1509 - one prctl, async-signal-safe
            )
        finally:
            guest_sock.close()
        stdout_fd, stderr_fd = take_output_pipes(popen)
        # No tmpfs mounts of its own and no task cap (RLIMIT_NPROC would count the user's
        # every process): the host watches its memory and CPU only.
        meter = ProcMeter(self.limits, mounts=())
        process = SandboxProcess(popen, host_sock, stdout_fd, stderr_fd, False, meter, workspace)
        process._cleanups.append(lambda: _kill_group(popen.pid))
        if chosen is None:  # a workspace the caller chose is theirs to keep
            process._cleanups.append(lambda: shutil.rmtree(workspace, ignore_errors=True))
        return process


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)

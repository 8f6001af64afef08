"""What every backend needs to start a guest: its bootstrap, the bridge, its output pipes."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

from codemode.errors import UsageError

__all__ = [
    "BOOTSTRAP",
    "GUEST_DIR",
    "bridge_socketpair",
    "default_python_paths",
    "PR_SET_PDEATHSIG",
    "dies_with_parent",
    "host_workspace",
    "interpreter",
    "prctl_function",
    "take_output_pipes",
]

GUEST_DIR = Path(__file__).parent / "guest"
BOOTSTRAP = (
    "import sys;sys.path.insert(0,{root!r});"
    "from _codemode_guest.main import main;main(sys.argv[1:])"
)
_BRIDGE_BUFFER_BYTES = 4 * 1024 * 1024


def interpreter() -> str:
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def default_python_paths() -> tuple[str, ...]:
    """The site directories of the interpreter codemode runs in (its virtualenv)."""
    paths = sysconfig.get_paths()
    found = []
    for key in ("purelib", "platlib"):
        path = os.path.realpath(paths[key])
        if path not in found and Path(path).is_dir():
            found.append(path)
    return tuple(found)


def bridge_socketpair() -> tuple[socket.socket, socket.socket]:
    """The bridge: large buffers so a 10 MB value crosses in a few system calls."""
    pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    for end in pair:
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            with contextlib.suppress(OSError):
                end.setsockopt(socket.SOL_SOCKET, option, _BRIDGE_BUFFER_BYTES)
    return pair


def take_output_pipes(popen: subprocess.Popen[bytes]) -> tuple[int, int]:
    """The guest's stdout and stderr as plain descriptors the host owns."""
    assert popen.stdout is not None and popen.stderr is not None
    stdout_fd = os.dup(popen.stdout.fileno())
    stderr_fd = os.dup(popen.stderr.fileno())
    popen.stdout.close()
    popen.stderr.close()
    return stdout_fd, stderr_fd


def host_workspace(workspace: Path | None) -> Path | None:
    """A host directory chosen as the workspace, resolved; it must exist."""
    if workspace is None:
        return None
    resolved = workspace.expanduser().resolve()
    if not resolved.is_dir():
        raise UsageError(
            f"workspace {str(workspace)!r} is not a directory",
            fix="create the directory first, or pass another one",
        )
    return resolved


PR_SET_PDEATHSIG = 1


def prctl_function() -> Callable[[int, int], int] | None:
    """libc's ``prctl``, or None where it cannot be had."""
    try:
        import ctypes

        function: Callable[[int, int], int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return function


def dies_with_parent() -> Callable[[], None]:
    """A ``preexec_fn``: the child is killed when the thread that started it ends (a gateway
    that crashes or is killed leaves no guest running)."""
    prctl = prctl_function()

    def setup() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    return setup

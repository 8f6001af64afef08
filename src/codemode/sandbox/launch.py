"""What every backend needs to start a guest: its bootstrap, the bridge, its output pipes."""

from __future__ import annotations

import contextlib
import importlib.util
import marshal
import os
import signal
import socket
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

from codemode.errors import UsageError
from codemode.sandbox.layout import GUEST_PACKAGE, GUEST_ROOT

__all__ = [
    "BOOTSTRAP",
    "GUEST_DIR",
    "bridge_socketpair",
    "default_python_paths",
    "PR_SET_PDEATHSIG",
    "TEMPLATE_BOOTSTRAP",
    "dies_with_parent",
    "guest_package_files",
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
# The template that forks sandboxes (``guest/template.py``; the host's ``template.py``).
TEMPLATE_BOOTSTRAP = (
    "import sys;sys.path.insert(0,{root!r});"
    "from _codemode_guest.template import main;main(sys.argv[1:])"
)
_BRIDGE_BUFFER_BYTES = 4 * 1024 * 1024


def guest_package_files() -> dict[str, bytes]:
    """The guest package's files by their path in the package: each module's source and its
    bytecode, compiled here once. Read from ``__pycache__``, the bytecode spares every new guest
    compiling the package, and the heap that compiling leaves behind (0.9 MiB of each idle
    sandbox's private memory). It is "unchecked hash-based" (PEP 552): valid whatever the
    sources' times in the sandbox, which are copies made at its start."""
    files: dict[str, bytes] = {}
    tag = sys.implementation.cache_tag
    for path in sorted(GUEST_DIR.glob("*.py")):
        source = path.read_bytes()
        filename = f"{GUEST_ROOT}/{GUEST_PACKAGE}/{path.name}"
        code = compile(source, filename, "exec", dont_inherit=True)
        header = importlib.util.MAGIC_NUMBER + (0b01).to_bytes(4, "little")
        files[path.name] = source
        files[f"__pycache__/{path.stem}.{tag}.pyc"] = (
            header + importlib.util.source_hash(source) + marshal.dumps(code)
        )
    return files


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

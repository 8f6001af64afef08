"""Ask this user's search daemon for hits, and start it in the background when none answers.

``ask`` answers or returns None (no daemon, a refusal, a timeout): the caller then searches in
its own process, so a daemon is only ever a shortcut and no search waits for one to start.
``start_in_background`` starts the daemon without waiting for it: it takes the key's lock file
without blocking (held by someone else: a start is under way, so it starts none), asks again
under the lock (a daemon may have become ready meanwhile), and hands the lock to the daemon,
which releases it once it listens. So concurrent first searches start one daemon, and later
searches find it running. The daemon waits to load its index until the starter calls
``DaemonStart.release()`` after answering its own search (or exits): loading beside that search
slowed it by half on a loaded two-core machine.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.search.daemon.runtime import runtime_dir, socket_path

if TYPE_CHECKING:
    import subprocess

__all__ = ["DaemonStart", "ask", "lock_path", "start_in_background", "stop"]

_ANSWER_TIMEOUT_S = 30.0
# The daemon's first process forks and exits before it loads anything.
_REAP_TIMEOUT_S = 30.0


def ask(key: str, request: dict[str, Any], *, timeout: float = _ANSWER_TIMEOUT_S) -> Any:
    """The daemon's reply to ``request``, or None when no daemon for ``key`` answers."""
    directory = runtime_dir()
    if directory is None:
        return None
    path = socket_path(directory, key)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(timeout)
            connection.connect(str(path))
            connection.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = connection.recv(65536)
                if not chunk:
                    return None
                data += chunk
        return json.loads(data)
    except (OSError, ValueError):
        return None


def lock_path(directory: Path, key: str) -> Path:
    """The lock file held while the daemon for ``key`` is being started."""
    return directory / f"s-{key}.lock"


class DaemonStart:
    """A daemon started in the background, waiting for this process's own search to finish."""

    def __init__(self, process: subprocess.Popen[bytes], go: int) -> None:
        self._process = process
        self._go = go

    def release(self) -> None:
        """Let the daemon load its index (not before: on two cores its loading slowed this
        process's search down), and reap its first process, which exited once it forked."""
        import subprocess

        if self._go >= 0:
            os.close(self._go)
            self._go = -1
        try:
            self._process.wait(timeout=_REAP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return  # collected by init once this process exits


def _server_command(key: str, fingerprint: str, mode: str, lock_fd: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "codemode.search.daemon.server",
        key,
        fingerprint,
        mode,
        "--lock-fd",
        str(lock_fd),
    ]


def _detached(go_fd: int, command: list[str]) -> list[str]:
    detach = Path(__file__).with_name("detach.py")
    return [sys.executable, "-I", "-S", str(detach), str(go_fd), *command]


def start_in_background(key: str, fingerprint: str, mode: str) -> DaemonStart | None:
    """Start the daemon for ``key`` without waiting for it; ``release()`` the result once this
    process's own search has answered.

    None when no start was made: another process is starting it (it holds the key's lock), one
    answers already, or it cannot be started here (no private runtime directory, no process).
    """
    import fcntl
    import subprocess

    directory = runtime_dir()
    if directory is None:
        return None
    try:
        lock = os.open(lock_path(directory, key), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None  # a start is under way
        if ask(key, {"op": "ping"}) is not None:
            return None  # a daemon became ready since the caller asked
        go_read, go_write = os.pipe()
        try:
            with (directory / f"s-{key}.log").open("ab") as log:
                process = subprocess.Popen(
                    _detached(go_read, _server_command(key, fingerprint, mode, lock)),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    pass_fds=(lock, go_read),
                    close_fds=True,
                )
        except BaseException:
            os.close(go_write)
            raise
        finally:
            os.close(go_read)
        return DaemonStart(process, go_write)
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        # Only this copy: the daemon's copy keeps the lock (an flock belongs to the open file,
        # so no LOCK_UN here, which would release it for the daemon too).
        os.close(lock)


def stop(key: str) -> bool:
    """Ask the daemon for ``key`` to exit; True if one answered."""
    return ask(key, {"op": "stop"}) is not None

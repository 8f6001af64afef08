"""Ask this user's search daemon for hits, starting it when none answers.

``ask`` answers or returns None (no daemon, a refusal, a timeout): the caller then searches in
its own process, so a daemon is only ever a shortcut. ``start`` runs under an exclusive lock per
daemon key, so concurrent first searches start one daemon, not several.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from codemode.search.daemon.runtime import runtime_dir, socket_path

__all__ = ["ask", "ask_or_start", "start", "stop"]

_ANSWER_TIMEOUT_S = 30.0
# Opening a semantic index loads the model: seconds on a loaded machine, more the first time.
_START_TIMEOUT_S = 120.0


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


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def start(key: str, fingerprint: str, mode: str) -> bool:
    """Start the daemon for ``key`` (call under the key's lock); True once it is ready."""
    import select
    import subprocess
    import time

    directory = runtime_dir()
    if directory is None:
        return False
    read_end, write_end = os.pipe()
    try:
        with (directory / f"s-{key}.log").open("ab") as log:
            starter = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "codemode.search.daemon.server",
                    key,
                    fingerprint,
                    mode,
                    "--ready-fd",
                    str(write_end),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                pass_fds=(write_end,),
                close_fds=True,
            )
        os.close(write_end)
        write_end = -1
        starter.wait(timeout=_START_TIMEOUT_S)  # the daemon forks at once; its parent exits
        deadline = time.monotonic() + _START_TIMEOUT_S
        data = b""
        while b"\n" not in data and (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([read_end], [], [], left)
            if not readable:
                break
            chunk = os.read(read_end, 64)
            if not chunk:
                break  # it exited without becoming ready
            data += chunk
        return data.startswith(b"ready")
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def ask_or_start(key: str, fingerprint: str, mode: str, request: dict[str, Any]) -> Any:
    """``ask``; when no daemon answers, start one (once, under a lock) and ask it."""
    reply = ask(key, request)
    if reply is not None:
        return reply
    directory = runtime_dir()
    if directory is None:
        return None
    with _locked(directory / f"s-{key}.lock"):
        reply = ask(key, request)  # another search may have started it meanwhile
        if reply is not None:
            return reply
        if not start(key, fingerprint, mode):
            return None
    return ask(key, request)


def stop(key: str) -> bool:
    """Ask the daemon for ``key`` to exit; True if one answered."""
    return ask(key, {"op": "stop"}) is not None

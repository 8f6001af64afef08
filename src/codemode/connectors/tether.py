"""Keeps an MCP server started over stdio from outliving the gateway that started it.

The stdio transport (``stdio_transport``) starts a server in a session of its own and stops it
(end of input, then its process group) only when the gateway shuts down cleanly. A gateway
killed by SIGKILL or a crash leaves a server that does not stop at the end of its input (busy,
or waiting on a child) running forever. So each stdio server is started through this program
(``tethered_argv``): it runs the server as its child, in a process group of the server's own,
and once the gateway is gone (this process was reparented) it stops that whole group: SIGTERM,
then SIGKILL after a grace period, as it does when asked to stop (SIGTERM, SIGINT, SIGHUP: the
transport's own stop). The server dies with this program too (``PR_SET_PDEATHSIG``, set in the
child; safe here: this program runs no other thread). ``tethered_pid`` finds the server's pid
for diagnostics and tests.

Standard library only, run by path: ``python -I -S tether.py GATEWAY_PID -- COMMAND ARGS``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["tethered_argv", "tethered_pid"]

# How often the gateway's presence is checked, and how long the server gets to stop on its own.
_CHECK_S = 0.2
_GRACE_S = 2.0
_PR_SET_PDEATHSIG = 1
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def tethered_argv(command: str, args: list[str]) -> list[str]:
    """The argv that runs ``command args`` tethered to this process."""
    return [sys.executable, "-I", "-S", __file__, str(os.getpid()), "--", command, *args]


def tethered_pid(stderr: tuple[int, int]) -> int | None:
    """The pid of the server a tether started by this process runs, found by its stderr
    (``(st_dev, st_ino)`` of the file both write to), or None (not started yet, or gone)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"{entry.path}/stat", encoding="ascii") as stat:  # noqa: PTH123
                    parents[int(entry.name)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    parent = os.getpid()
    for _ in ("tether", "server"):
        found = [pid for pid, ppid in parents.items() if ppid == parent and _writes_to(pid, stderr)]
        if not found:
            return None
        parent = found[0]
    return parent


def _writes_to(pid: int, stderr: tuple[int, int]) -> bool:
    try:
        theirs = Path(f"/proc/{pid}/fd/2").stat()
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == stderr


def _dies_with_this_process() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child killed when this program dies, where libc has
    ``prctl`` (elsewhere the group is still stopped when the gateway goes)."""
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _stop_group(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's whole group, SIGKILL to what is left of it after the grace."""
    for name in _STOP_SIGNALS:
        signal.signal(name, signal.SIG_IGN)
    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(_GRACE_S)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: tether.py GATEWAY_PID -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    gateway, command = int(argv[0]), argv[2:]
    if os.getppid() != gateway:
        return 1  # the gateway died before this program started
    try:
        # A group of its own, as the transport would have made it: ``killpg`` on its pid works.
        child = subprocess.Popen(
            command,
            process_group=0,
            preexec_fn=_dies_with_this_process(),  # noqa: PLW1509
        )
    except OSError as error:
        print(f"codemode: cannot start {command[0]!r}: {error}", file=sys.stderr)
        return 127

    def stop(number: int, frame: object) -> None:
        _stop_group(child)
        sys.exit(128 + number)

    for name in _STOP_SIGNALS:
        signal.signal(name, stop)
    while True:
        try:
            return _exit_code(child.wait(_CHECK_S))
        except subprocess.TimeoutExpired:
            pass
        if os.getppid() != gateway:
            _stop_group(child)
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

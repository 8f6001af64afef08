"""Keeps an MCP server started over stdio from outliving the gateway that started it.

The stdio transport (``stdio_transport``) starts a server in a session of its own and stops it
(end of input, then its process group) only when the gateway shuts down cleanly. A gateway
killed by SIGKILL or a crash leaves a server that does not stop at the end of its input (busy,
or waiting on a child) running forever. So each stdio server is started through a tether
(``codemode.connectors.shell_tether.tethered_argv``: a shell script where the system has the
tools for it, else this program). This program runs the server as its child, in a process group
of the server's own, and once the gateway is gone (this process was reparented) it stops that
whole group: SIGTERM, then SIGKILL after a grace period, as it does when asked to stop
(SIGTERM, SIGINT, SIGHUP: the transport's own stop). The server dies with this program too
(``PR_SET_PDEATHSIG``, set in the child; safe here: this program runs no other thread).
``tethered_pid`` finds the server's pid (under either tether) for diagnostics and tests.

Standard library only, run by path: ``python -I -S tether.py GATEWAY_PID -- COMMAND ARGS``.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

__all__ = ["python_tether_argv", "tethered_pid"]

# How often the gateway's presence is checked, and how long the server gets to stop on its own.
_CHECK_S = 0.2
_GRACE_S = 2.0
# How often an exit is looked for where the kernel has no pidfd.
_POLL_S = 0.05
_PR_SET_PDEATHSIG = 1
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def python_tether_argv(command: str, args: list[str]) -> list[str]:
    """The argv that runs ``command args`` tethered to this process by this program (where
    ``shell_tether`` cannot: ``tethered_argv`` there chooses)."""
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
    from pathlib import Path  # the gateway's side only: the tether itself never loads it

    try:
        theirs = Path(f"/proc/{pid}/fd/2").stat()
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == stderr


def _start(command: list[str]) -> int:
    """Fork and exec ``command`` as the server: in a process group of its own (``killpg`` on
    its pid works, as the transport would have made it), killed when this program dies, with
    the signal dispositions a fresh program expects. Returns its pid. A command that cannot
    start exits 127 with the reason on stderr.

    Not ``subprocess``: this program stays running beside every stdio server, and importing
    ``subprocess`` (with ``ctypes`` for ``prctl``) costs it about 2 MiB of private memory; the
    child imports what it needs and then ``exec`` discards it."""
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setpgid(0, 0)
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        # Python ignores these; a program it starts must not inherit that.
        for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        # Every other descriptor here is close-on-exec (Python opens them so; the gateway
        # started this program with its own closed).
        os.execvp(command[0], command)  # noqa: S606 - the server's own argv, as configured
    except BaseException as error:  # noqa: BLE001 - the child must never return to main()
        with contextlib.suppress(BaseException):
            os.write(2, f"codemode: cannot start {command[0]!r}: {error}\n".encode())
    os._exit(127)


def _wait(pid: int, timeout: float, ready: int | None) -> int | None:
    """``pid``'s exit code (negative: the signal that ended it) once it exits within
    ``timeout``, else None. ``ready``: a pidfd of ``pid``, readable once it exits."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if ready is not None:
            select.select([ready], [], [], left)
        else:
            time.sleep(min(left, _POLL_S))


def _stop_group(pid: int, ready: int | None) -> None:
    """SIGTERM to the server's whole group, SIGKILL to what is left of it after the grace."""
    for name in _STOP_SIGNALS:
        signal.signal(name, signal.SIG_IGN)
    try:
        os.killpg(pid, signal.SIGTERM)
        _wait(pid, _GRACE_S, ready)
    except (ProcessLookupError, ChildProcessError):
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: tether.py GATEWAY_PID -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    gateway, command = int(argv[0]), argv[2:]
    if os.getppid() != gateway:
        return 1  # the gateway died before this program started
    child = _start(command)
    try:
        ready: int | None = os.pidfd_open(child)
    except (AttributeError, OSError):  # kernels before 5.3: poll
        ready = None

    def stop(number: int, frame: object) -> None:
        _stop_group(child, ready)
        sys.exit(128 + number)

    for name in _STOP_SIGNALS:
        signal.signal(name, stop)
    while True:
        code = _wait(child, _CHECK_S, ready)
        if code is not None:
            return _exit_code(code)
        if os.getppid() != gateway:
            _stop_group(child, ready)
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

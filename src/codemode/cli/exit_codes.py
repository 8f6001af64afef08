"""The exit statuses of ``codemode`` (documented in the README's CLI section).

``codemode exec`` exits with the code's own status: 0, 1 for an uncaught exception, N for
``sys.exit(N)``. codemode's own outcomes use the codes below, chosen as shells and ``timeout(1)``
do, so scripts can tell them apart.
"""

from __future__ import annotations

from enum import IntEnum

from codemode.errors import (
    CodemodeError,
    IsolationUnavailableError,
    SandboxError,
    ServersNotLoadedError,
    UsageError,
)

__all__ = ["ExitCode", "describe", "for_error", "for_status"]


class ExitCode(IntEnum):
    OK = 0
    CODE_RAISED = 1  # the code ended with an uncaught exception
    USAGE = 2  # a bad argument or config
    SERVERS_NOT_LOADED = 69  # a configured server failed to load (see --allow-partial)
    FAILURE = 70  # another failure inside codemode (an upstream, a session)
    TIMEOUT = 124  # the code ran past its wall-time limit
    LIMIT = 125  # the code hit a sandbox limit (memory, CPU time, processes, files)
    SANDBOX = 126  # no sandbox: it could not start, or isolation is unavailable here
    INTERRUPTED = 130  # Ctrl-C


_MEANINGS = {
    ExitCode.OK: "the code ran to the end",
    ExitCode.CODE_RAISED: "the code raised an uncaught exception",
    ExitCode.USAGE: "a usage or config error",
    ExitCode.SERVERS_NOT_LOADED: "a configured server failed to load (see --allow-partial)",
    ExitCode.FAILURE: "another failure inside codemode",
    ExitCode.TIMEOUT: "the code ran past its wall-time limit",
    ExitCode.LIMIT: "the code hit a sandbox limit (memory, CPU, processes, files)",
    ExitCode.SANDBOX: "no sandbox: it could not start, or isolation is unavailable",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C or SIGTERM)",
}


def describe() -> str:
    """The exit statuses, one per line, for ``--help``."""
    lines = ["exit status: the code's own (sys.exit(N) exits N), or:"]
    lines += [f"  {int(code):>3}  {meaning}" for code, meaning in _MEANINGS.items()]
    return "\n".join(lines)


def for_error(error: CodemodeError) -> ExitCode:
    if isinstance(error, IsolationUnavailableError | SandboxError):
        return ExitCode.SANDBOX
    if isinstance(error, ServersNotLoadedError):
        return ExitCode.SERVERS_NOT_LOADED
    if isinstance(error, UsageError):
        return ExitCode.USAGE
    return ExitCode.FAILURE


def for_status(status: str, exit_code: int | None) -> int:
    """The exit status for an execution's result."""
    if status == "timeout":
        return ExitCode.TIMEOUT
    if status == "limit":
        return ExitCode.LIMIT
    if status == "cancelled":
        return ExitCode.INTERRUPTED
    if status == "session_lost":  # the cluster node holding the sandbox was lost
        return ExitCode.FAILURE
    if status == "ok":
        return ExitCode.OK
    if exit_code:
        return exit_code & 0xFF or ExitCode.CODE_RAISED
    return ExitCode.CODE_RAISED

"""A session whose sandbox lives on a cluster node: like ``SandboxSession``, plus the one new
failure a cluster has. A lost node (or the way to it) ends the session's state, and the next
result says so plainly as ``session_lost``: never a hang, never a silent reset."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from codemode.bridge.host import NO_TOOLS, ToolAccess
from codemode.cluster.remote import RemoteGuest
from codemode.errors import SandboxError
from codemode.sandbox.reports import SessionLoss
from codemode.sandbox.result import ExecutionResult
from codemode.sandbox.runner import OutputCallback, Sandbox
from codemode.sandbox.session import SandboxHolder

__all__ = ["RemoteSession", "remote_guest", "session_lost_result"]

_LOST_HINT = (
    "The cluster node that held this session's sandbox was lost: variables and workspace "
    "files are gone. Run again to continue in a new sandbox (on another node)."
)


def remote_guest(sandbox: Sandbox) -> RemoteGuest:
    process = sandbox.process
    assert isinstance(process, RemoteGuest), "not a sandbox of the cluster provider"
    return process


def session_lost_result(
    session: str | None, *, node: str | None, ran: ExecutionResult | None = None
) -> ExecutionResult:
    """``session_lost``: what ran before the loss (its output so far) is kept in the result."""
    return ExecutionResult(
        status="session_lost",
        exit_code=None,
        stdout=ran.stdout if ran else "",
        stderr=ran.stderr if ran else "",
        error=None,
        files={"created": [], "modified": [], "deleted": []},
        tool_calls=ran.tool_calls if ran else {},
        duration_ms=ran.duration_ms if ran else 0.0,
        truncated=ran.truncated if ran else {},
        hint=_LOST_HINT,
        session=session,
        sandbox_reset=True,
        loss=SessionLoss(node, ran is not None),
    )


class RemoteSession(SandboxHolder):
    """One session's remote sandbox, placed on first use and replaced after a loss."""

    def __init__(
        self,
        place: Callable[[], Sandbox],
        session_id: str | None,
        fresh_from: Callable[[Sandbox], tuple[Sandbox, list[str]]],
    ) -> None:
        super().__init__(session_id)
        self.place = place
        # A new sandbox on the same node holding the old one's files, and the names skipped.
        self.fresh_from = fresh_from

    def lost(self) -> bool:
        """False: a lost node is said as ``session_lost`` by the next execution itself."""
        return False

    def execute(
        self,
        code: str,
        *,
        tools: ToolAccess = NO_TOOLS,
        fresh: bool = False,
        timeout_s: float | None = None,
        on_output: OutputCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> ExecutionResult:
        with self._lock:
            if self._closed:
                raise SandboxError("this session is closed", fix="start a new session")
            sandbox = self._sandbox
            if sandbox is not None and remote_guest(sandbox).lost:
                # Lost while idle: say so before running anything in a new sandbox.
                sandbox.kill()
                self._sandbox = None
                return session_lost_result(self.id, node=remote_guest(sandbox).node)
            if sandbox is not None and sandbox.dead:
                sandbox = None
            skipped: list[str] = []
            if fresh and sandbox is not None:
                new, skipped = self.fresh_from(sandbox)
                sandbox.kill()
                sandbox = self._sandbox = new
            if sandbox is None:
                sandbox = self._sandbox = self.place()  # may raise ClusterBusyError
                self.released = False
            self.executions += 1
            result = sandbox.execute(
                code, tools=tools, timeout_s=timeout_s, on_output=on_output, cancel=cancel
            )
            guest = remote_guest(sandbox)
            if guest.lost:
                sandbox.kill()
                self._sandbox = None
                return session_lost_result(self.id, node=guest.node, ran=result)
            if sandbox.dead:
                self._sandbox = None
            return replace(
                result,
                session=self.id,
                sandbox_reset=result.sandbox_reset or sandbox.dead,
                files_not_carried=skipped or None,
            )

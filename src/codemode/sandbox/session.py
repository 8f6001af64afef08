"""A sandbox session: one sandbox and its workspace, reused across executions.

Files and variables persist between executions (like a notebook). ``fresh=True`` runs the code
in a new interpreter from the pool, with the workspace's files carried over by the host: nothing
the earlier code patched (builtins, modules, the tool runtime) survives it. When a limit or
timeout kills the sandbox, the next execution gets a new one from the pool and the result says
the state was reset. ``release()`` stops the sandbox between executions (an idle session's
memory goes back to the machine); the next execution starts a new one, empty.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from codemode.bridge.host import NO_TOOLS, ToolAccess
from codemode.errors import SandboxError
from codemode.sandbox.pool import SandboxPool
from codemode.sandbox.process import SandboxProcess
from codemode.sandbox.result import ExecutionResult
from codemode.sandbox.runner import OutputCallback, Sandbox
from codemode.sandbox.workspace import CopyReport, copy_workspace, scan

__all__ = ["LOST_BEFORE_HINT", "SandboxHolder", "SandboxSession", "carry_workspace"]

_SKIPPED_LISTED = 20
LOST_BEFORE_HINT = (
    "The session's sandbox had ended (stopped from outside) before this execution: it ran in "
    "a new one, without the earlier variables and workspace files."
)


def _local(sandbox: Sandbox) -> SandboxProcess:
    if not isinstance(sandbox.process, SandboxProcess):
        raise SandboxError(
            "only sandboxes on this machine carry their files into a fresh interpreter",
            fix="run without fresh=true",
        )
    return sandbox.process


def carry_workspace(source: Sandbox, target: Sandbox) -> CopyReport:
    """Copy ``source``'s workspace into ``target``'s (a new sandbox that has run nothing).
    ``source`` is stopped between executions, so nothing changes under the copy."""
    src = _local(source).open_workspace()
    try:
        dst = _local(target).open_workspace()
        try:
            report = copy_workspace(src, dst)
            target.files, _ = scan(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)
    return report


class SandboxHolder:
    """Holds one session's sandbox, one at a time, wherever it runs (``SandboxSession``: a
    local pool; ``RemoteSession``: a cluster node): its state, ``release`` while idle, its live
    counts and ``close``. Both are what the engine knows as a ``SessionSandbox``."""

    def __init__(self, session_id: str | None) -> None:
        self.id = session_id
        self._sandbox: Sandbox | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.executions = 0
        # Stopped by release() and not used since.
        self.released = False

    @property
    def sandbox(self) -> Sandbox | None:
        return self._sandbox

    def live_counts(self) -> tuple[int, int]:
        sandbox = self._sandbox
        return sandbox.live_counts() if sandbox is not None else (0, 0)

    def live_stdout(self) -> str:
        sandbox = self._sandbox
        return sandbox.live_stdout() if sandbox is not None else ""

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._sandbox is not None:
                self._stop(self._sandbox)
                self._sandbox = None

    def _stop(self, sandbox: Sandbox) -> None:
        """Stop a sandbox this session is done with."""
        sandbox.kill()

    def lost(self) -> bool:
        """The sandbox held ended without being stopped (killed from outside)."""
        sandbox = self._sandbox
        return sandbox is not None and not sandbox.dead and not sandbox.process.alive()

    def release(self, still_idle: Callable[[], bool] = lambda: True) -> bool:
        """Stop the sandbox if no execution is running and ``still_idle()`` agrees (asked
        once nothing can start meanwhile): True when a sandbox was stopped. Its files and
        variables are gone; a wrapper that checkpoints restores them."""
        if not self._lock.acquire(blocking=False):
            return False  # an execution is running
        try:
            sandbox = self._sandbox
            if self._closed or sandbox is None or not still_idle():
                return False
            self._sandbox = None
            self._stop(sandbox)
            self.released = True
            return True
        finally:
            self._lock.release()


class SandboxSession(SandboxHolder):
    def __init__(self, pool: SandboxPool, session_id: str | None = None) -> None:
        super().__init__(session_id)
        self.pool = pool

    def _stop(self, sandbox: Sandbox) -> None:
        sandbox.kill()
        # Stopped: the pool would otherwise keep it (and its last output) until its next
        # start, and an idle gateway starts none.
        self.pool.forget(sandbox)

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
            self.released = False
            sandbox = self._sandbox
            carried: CopyReport | None = None
            # Ended between executions, unasked (``lost``): its descriptors and cgroups are
            # freed here, and this code runs in a new sandbox (the result says what is gone).
            lost = self.lost()
            if sandbox is not None and (lost or sandbox.dead):
                self._stop(sandbox)
                sandbox = None
            if sandbox is not None and fresh:
                sandbox, carried = self._fresh_from(sandbox)
            if sandbox is None:
                sandbox = self.pool.acquire()
            self._sandbox = sandbox
            if sandbox.process.egress is not None:  # its connections count for this session
                sandbox.process.egress.session = self.id or ""
            self.executions += 1
            result = sandbox.execute(
                code, tools=tools, timeout_s=timeout_s, on_output=on_output, cancel=cancel
            )
            if sandbox.dead:
                self._stop(sandbox)
                self._sandbox = None
            skipped = carried.skipped[:_SKIPPED_LISTED] if carried is not None else []
            # The result is this execution's own, built for it: set in place (a ``replace``
            # of its thirty fields cost more than any other step of a warm execution).
            result.session = self.id
            result.sandbox_reset = result.sandbox_reset or sandbox.dead or lost
            if lost:
                result.hint = f"{LOST_BEFORE_HINT} {result.hint}".strip()
            result.files_not_carried = skipped or None
            return result

    def _fresh_from(self, old: Sandbox) -> tuple[Sandbox, CopyReport]:
        """A new interpreter from the pool holding ``old``'s files; ``old`` is stopped."""
        new = self.pool.acquire()
        try:
            report = carry_workspace(old, new)
        except OSError as error:
            self._stop(new)
            raise SandboxError(
                f"could not carry the workspace into a fresh interpreter: {error}",
                fix="run again without fresh=true, or start a new session",
            ) from error
        except BaseException:
            self._stop(new)
            raise
        self._stop(old)
        return new, report

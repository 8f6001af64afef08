"""Where a session's sandbox comes from: the seam between the engine and the sandbox.

``PooledSandboxes`` is the real one (bubblewrap sandboxes from a warm pool). The in-process
twin in ``codemode.sandbox.inprocess`` lets engine, gateway and CLI tests run where user
namespaces are unavailable. A cluster backend is one more provider.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from codemode.bridge.host import NO_TOOLS, ToolAccess
from codemode.sandbox.pool import SandboxPool
from codemode.sandbox.result import ExecutionResult
from codemode.sandbox.runner import OutputCallback
from codemode.sandbox.session import SandboxSession

__all__ = ["PooledSandboxes", "SandboxProvider", "SessionSandbox"]


class SessionSandbox(Protocol):
    """One session's sandbox: files and variables persist between executions."""

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
        """Run ``code``; once ``cancel`` is set no tool call starts and the code is stopped,
        and the result's status is ``cancelled``."""
        ...

    def live_counts(self) -> tuple[int, int]:
        """(tool calls, bytes printed) of the execution running now; any thread may ask."""
        ...

    def live_stdout(self) -> str:
        """The tail of what the execution paused now (waiting on a tool call) printed so far."""
        ...

    @property
    def released(self) -> bool:
        """True once release() stopped the sandbox, until the next execution starts one."""
        ...

    def release(self, still_idle: Callable[[], bool] = ...) -> bool:
        """Stop the sandbox between executions to give its memory back, if no execution runs
        and ``still_idle()`` (asked when none can start meanwhile) agrees. True when one was
        stopped; what the next execution finds is what a checkpointing wrapper restores.
        Sandboxes with nothing to free return False."""
        ...

    def lost(self) -> bool:
        """The sandbox the session holds has ended without being stopped (killed from
        outside, its template gone): its variables and files went with it. Cheap: asked
        before every execution."""
        ...

    def close(self) -> None: ...


class SandboxProvider(Protocol):
    # Whether its sandboxes have a workspace of their own (files listed, read, project mode).
    has_workspace: bool

    @property
    def isolated(self) -> bool:
        """Whether its sandboxes are isolated (a session's checkpoints are kept only then)."""
        ...

    def open(self, session_id: str) -> SessionSandbox: ...

    def expect(self) -> None:
        """A client connected, listed or searched: a session is likely soon. Get ready for
        it where that is cheap (a warm pool back from idle); never waits for a start."""
        ...

    def close(self) -> None:
        """Stop every sandbox this provider started."""
        ...


class PooledSandboxes:
    """Isolated sandboxes taken from a warm pool."""

    has_workspace = True

    def __init__(self, pool: SandboxPool, *, owns_backend: bool = False) -> None:
        self.pool = pool
        # A backend made for this provider is stopped with it (its sandbox template).
        self.owns_backend = owns_backend

    @property
    def isolated(self) -> bool:
        return self.pool.backend.isolated

    def open(self, session_id: str) -> SandboxSession:
        return SandboxSession(self.pool, session_id)

    def expect(self) -> None:
        self.pool.expect()

    def close(self) -> None:
        self.pool.close()
        close_backend = getattr(self.pool.backend, "close", None)
        if self.owns_backend and callable(close_backend):
            close_backend()

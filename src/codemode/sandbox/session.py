"""A sandbox session: one sandbox and its workspace, reused across executions.

Files and variables persist between executions (like a notebook). ``fresh=True`` clears the
variables and imported modules but keeps the files. When a limit or timeout kills the sandbox,
the next execution gets a new one from the pool and the result says the state was reset.
"""

from __future__ import annotations

import threading

from codemode.bridge.host import NO_TOOLS, ToolAccess
from codemode.errors import SandboxError
from codemode.sandbox.pool import SandboxPool
from codemode.sandbox.result import ExecutionResult
from codemode.sandbox.runner import OutputCallback, Sandbox

__all__ = ["SandboxSession"]


class SandboxSession:
    def __init__(self, pool: SandboxPool, session_id: str | None = None) -> None:
        self.pool = pool
        self.id = session_id
        self._sandbox: Sandbox | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.executions = 0

    @property
    def sandbox(self) -> Sandbox | None:
        return self._sandbox

    def execute(
        self,
        code: str,
        *,
        tools: ToolAccess = NO_TOOLS,
        fresh: bool = False,
        timeout_s: float | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecutionResult:
        with self._lock:
            if self._closed:
                raise SandboxError("this session is closed", fix="start a new session")
            sandbox = self._sandbox
            restarted = False
            if sandbox is not None and sandbox.ran_while_idle():
                # Code kept running after the last execution (it forged "done"): start clean.
                sandbox.kill()
                restarted = True
            if sandbox is None or sandbox.dead:
                sandbox = self._sandbox = self.pool.acquire()
            self.executions += 1
            result = sandbox.execute(
                code, tools=tools, fresh=fresh, timeout_s=timeout_s, on_output=on_output
            )
            if sandbox.dead:
                self._sandbox = None
                result.sandbox_reset = True
            if restarted:
                result.extra["restarted_before"] = True
                result.hint = (
                    "The previous execution left code running, so this one ran in a new "
                    "sandbox (variables and files from before are gone). " + result.hint
                ).strip()
            result.session = self.id
            return result

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._sandbox is not None:
                self._sandbox.kill()
                self._sandbox = None

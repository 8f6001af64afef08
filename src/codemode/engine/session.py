"""A session: one sandbox, its chain of wrappers, its vault, budgets and pending approval.

The engine's front ends (the MCP gateway, the CLI, the agent loop) never touch a sandbox or
a wrapper directly: they run code in a ``Session`` and get back its finished result, with the
handle set and every field that reaches the model scanned for personal data.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from codemode.engine.approvals import PendingApproval
from codemode.engine.chain import InvokerChain
from codemode.engine.invoker import cancellable
from codemode.engine.output import OutputCallback, ScannedOutput
from codemode.engine.views import CatalogViews
from codemode.memory.learning import FixLearner
from codemode.sandbox.provider import SessionSandbox
from codemode.sandbox.result import ExecutionResult

__all__ = ["Session"]


@dataclass(eq=False)
class Session:
    handle: str
    owner: str | None
    sandbox: SessionSandbox
    chain: InvokerChain
    created: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    # Executions running now (checked out by the registry); a busy session never expires.
    busy: int = 0
    # An execution paused before a call that needs a human; ``Codemode.approve`` resumes it.
    paused: asyncio.Task[ExecutionResult] | None = None
    # Set to stop the execution running now (its caller cancelled or went away).
    cancel: threading.Event | None = None
    # The finished result of an execution whose caller cancelled, until the next one reports it.
    cancelled: ExecutionResult | None = None
    # Remembers how this owner fixed errors, and offers the fix when one comes back.
    fixes: FixLearner | None = None
    # The code of the execution running now (for the fix memory).
    code: str = ""

    def run(
        self,
        code: str,
        views: CatalogViews,
        *,
        fresh: bool,
        timeout_s: float | None,
        on_output: OutputCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> ExecutionResult:
        """Run ``code`` in the sandbox (blocking: call it from a worker thread). Streamed
        output passes the same privacy net as the result's."""
        tools = replace(views.access(self.chain.invoker), on_refused=self.chain.on_refused)
        self.code = code
        scanned = None
        if on_output is not None and self.chain.privacy is not None:
            on_output = scanned = ScannedOutput(on_output, self.chain.privacy.scan_output)
        try:
            with cancellable(cancel):
                return self.sandbox.execute(
                    code,
                    tools=tools,
                    fresh=fresh,
                    timeout_s=timeout_s,
                    on_output=on_output,
                    cancel=cancel,
                )
        finally:
            if scanned is not None:
                scanned.flush()

    def live_counts(self) -> tuple[int, int]:
        """(tool calls, bytes printed) of the running execution, read from any thread."""
        return self.sandbox.live_counts()

    def finish(self, result: ExecutionResult) -> ExecutionResult:
        """The one place a raw outcome becomes what the client sees: the handle, and the
        second privacy net over every field the code could fill (output, hint, every field
        of the error, file names, tool-call names, the limit and any extra field)."""
        result.session = self.handle
        if self.fixes is not None:
            earlier = self.fixes.observe(self.code, result)
            if earlier:
                result.hint = f"{result.hint} This error was fixed before with:\n{earlier}".strip()
        privacy = self.chain.privacy
        if privacy is None:
            return result
        scan, scan_value = privacy.scan_output, privacy.scan_value
        result.stdout = scan(result.stdout)
        result.stderr = scan(result.stderr)
        result.hint = scan(result.hint)
        if result.limit is not None:
            result.limit = scan(result.limit)
        if result.error:
            result.error = scan_value(result.error)
        result.files = scan_value(result.files)
        result.tool_calls = scan_value(result.tool_calls)
        result.truncated = scan_value(result.truncated)
        result.extra = scan_value(result.extra)
        return result

    def approval_result(
        self, pending: PendingApproval, duration_ms: float, *, spill_dir: Path | None = None
    ) -> ExecutionResult:
        """``approval_required`` for ``pending``: its arguments through the same privacy scan
        as every result, with the digest of exactly what is shown (long ones in a file in
        ``spill_dir``)."""
        privacy = self.chain.privacy
        view = privacy.scan_value if privacy is not None else None
        described = pending.describe(view, spill_dir=spill_dir)
        if privacy is not None:
            described["reason"] = privacy.scan_output(described["reason"])
        return ExecutionResult.approval_required(described, self.handle, duration_ms)

    def close(self) -> None:
        """Stop the sandbox, write the audit log's counts, forget every value the vault held."""
        self.sandbox.close()
        self.chain.close()
        if self.chain.privacy is not None:
            self.chain.privacy.wipe()

"""A session: one sandbox, its chain of wrappers, its vault, budgets and pending approval.

The engine's front ends (the MCP gateway, the CLI, the agent loop) never touch a sandbox or
a wrapper directly: they run code in a ``Session`` and get back its finished result, with the
handle set and every field that reaches the model scanned for personal data.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from dataclasses import dataclass, field

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
        tools = views.access(self.chain.invoker)
        if self.chain.packages is not None:
            tools = dataclasses.replace(tools, packages=self.chain.packages)
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
        second privacy net over every text field the code could fill."""
        result.session = self.handle
        if self.fixes is not None:
            earlier = self.fixes.observe(self.code, result)
            if earlier:
                result.hint = f"{result.hint} This error was fixed before with:\n{earlier}".strip()
        privacy = self.chain.privacy
        if privacy is None:
            return result
        scan = privacy.scan_output
        result.stdout = scan(result.stdout)
        result.stderr = scan(result.stderr)
        result.hint = scan(result.hint)
        if result.error:
            for key in ("type", "message", "traceback"):
                if key in result.error:
                    result.error[key] = scan(str(result.error[key]))
        result.files = {
            kind: [scan(name) for name in names] for kind, names in result.files.items()
        }
        return result

    def close(self) -> None:
        """Stop the sandbox and forget every value the vault held."""
        self.sandbox.close()
        if self.chain.privacy is not None:
            self.chain.privacy.wipe()

"""A session: one sandbox, its chain of wrappers, its vault, budgets and pending approval.

The engine's front ends (the MCP gateway, the CLI, the agent loop) never touch a sandbox or
a wrapper directly: they run code in a ``Session`` and get back its finished result, with the
handle set and every field that reaches the model scanned for personal data.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from codemode.engine.approvals import PendingApproval
from codemode.engine.chain import InvokerChain
from codemode.engine.invoker import cancellable
from codemode.engine.output import OutputCallback, ScannedOutput
from codemode.engine.views import CatalogViews
from codemode.errors import SessionError, WorkspaceFileError
from codemode.files import WorkspaceFile, list_workspace, render_tree
from codemode.files.access import enter_fresh_dir, write_output_file
from codemode.memory.learning import FixLearner
from codemode.sandbox.provider import SessionSandbox
from codemode.sandbox.reports import Restore
from codemode.sandbox.result import ExecutionResult, whole_text
from codemode.skills.session import describe_restore

__all__ = ["Session"]

# The reports a result carries whose values can hold what the code wrote (names, text).
_USER_TEXT_REPORTS = (
    "left_running",
    "files_not_carried",
    "checkpoint",
    "stdout_file",
    "task_dir",
    "workspace_tree",
    "grants",
    "saved_files",
)


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
    # False for sandboxes without a workspace of their own (the in-process twin).
    has_workspace: bool = True
    # Project mode: the task's folder (``fresh_dir``), relative to the workspace.
    task_dir: str | None = None

    def run(
        self,
        code: str,
        views: CatalogViews,
        *,
        fresh: bool,
        timeout_s: float | None,
        on_output: OutputCallback | None = None,
        cancel: threading.Event | None = None,
        fresh_dir: bool = False,
    ) -> ExecutionResult:
        """Run ``code`` in the sandbox (blocking: call it from a worker thread). Streamed
        output passes the same privacy net as the result's.

        ``fresh_dir``: first make the next ``tasks/NNN`` folder and work there; from then on
        (project mode) every result shows the workspace's tree.
        """
        tools = replace(views.access(self.chain.invoker), on_refused=self.chain.on_refused)
        if self.chain.packages is not None:
            tools = replace(tools, packages=self.chain.packages)
        self.code = code
        restored: Restore | None = None  # the fresh_dir step's restore, if it made one
        if fresh_dir:
            if not self.has_workspace:
                raise SessionError(
                    "fresh_dir needs a sandbox with a workspace; this one has none",
                    fix="run codemode with its isolated sandbox (the default backend)",
                )
            self.task_dir, restored = enter_fresh_dir(
                self.sandbox, modules=views.modules, fresh=fresh
            )
            fresh = False
        scanned = None
        if on_output is not None and self.chain.privacy is not None:
            on_output = scanned = ScannedOutput(on_output, self.chain.privacy.scan_output)
        try:
            with cancellable(cancel):
                result = self.sandbox.execute(
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
        if restored is not None and result.restored is None:
            hint = f"{describe_restore(restored)} {result.hint}".strip()
            result = replace(result, restored=restored, hint=hint)
        if result.status == "cancelled":  # stop here: the caller asked for nothing more
            return replace(result, captured_stdout=None)
        if result.captured_stdout is not None:
            result = self._keep_whole_output(result, views)
        if self.task_dir is not None:
            result = self._show_project(result, views)
        return result

    def live_counts(self) -> tuple[int, int]:
        """(tool calls, bytes printed) of the running execution, read from any thread."""
        return self.sandbox.live_counts()

    @property
    def released(self) -> bool:
        """Its sandbox was released while idle; the next execution restores it."""
        return self.sandbox.released

    def release(self, still_idle: Callable[[], bool]) -> bool:
        """Checkpoint and stop the sandbox of this idle session (blocking: call it from a
        worker thread); see ``SessionSandbox.release``."""
        return self.sandbox.release(still_idle)

    def _keep_whole_output(self, result: ExecutionResult, views: CatalogViews) -> ExecutionResult:
        """The model saw the tail of stdout: write all of it to a workspace file, say where."""
        captured, result = result.captured_stdout, replace(result, captured_stdout=None)
        if captured is None or not self.has_workspace or result.sandbox_reset:
            return result
        try:
            path = write_output_file(self.sandbox, whole_text(captured), modules=views.modules)
        except WorkspaceFileError:
            return result
        hint = (
            f"Only the tail of the output is shown; all {captured.total:,} bytes are in the "
            f"workspace file {path} (~/{path} in code): read just the part you need."
        )
        return replace(result, stdout_file=path, hint=hint)

    def _show_project(self, result: ExecutionResult, views: CatalogViews) -> ExecutionResult:
        if result.sandbox_reset:
            self.task_dir = None  # the folder went with the sandbox
            return result
        try:
            tree = render_tree(list_workspace(self.sandbox, modules=views.modules))
        except WorkspaceFileError as error:
            tree = f"(not listed: {error.message})"
        return replace(result, task_dir=self.task_dir, workspace_tree=tree)

    def finish_file(self, file: WorkspaceFile) -> WorkspaceFile:
        """A workspace file on its way to the client: text gets the same privacy net as
        printed output (the code may have written what it printed)."""
        privacy = self.chain.privacy
        if privacy is None or not file.mime.startswith("text/"):
            return file
        try:
            text = file.data.decode("utf-8")
        except UnicodeDecodeError:
            return file
        scanned = privacy.scan_output(text)
        if scanned == text:
            return file
        return replace(file, data=scanned.encode("utf-8"))

    def finish(self, result: ExecutionResult) -> ExecutionResult:
        """The one place a raw outcome becomes what the client sees: the handle, and the
        second privacy net over every field the code could fill (output, hint, every field
        of the error, file names, tool-call names, the limit and any extra field)."""
        result.session = self.handle
        if len(self.chain.grants):  # the approvals this session remembers, for the client
            result.grants = self.chain.grants.snapshot()
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
        return replace(
            result,
            **{name: scan_value(getattr(result, name)) for name in _USER_TEXT_REPORTS},
            restored=result.restored.scanned(scan_value) if result.restored else None,
        )

    def approval_result(
        self, pending: PendingApproval, duration_ms: float, *, spill_dir: Path | None = None
    ) -> ExecutionResult:
        """``approval_required`` for ``pending``: its arguments through the same privacy scan
        as every result, with the digest of exactly what is shown (long ones in a file in
        ``spill_dir``)."""
        privacy = self.chain.privacy
        view = privacy.scan_value if privacy is not None else None
        described = pending.describe(view, spill_dir=spill_dir)
        printed = self.sandbox.live_stdout()
        if privacy is not None:
            described = replace(described, reason=privacy.scan_output(described.reason))
            printed = privacy.scan_output(printed)
        return ExecutionResult.approval_required(
            described, self.handle, duration_ms, printed=printed
        )

    def close(self) -> None:
        """Stop the sandbox, write the audit log's counts, forget every value the vault held."""
        self.sandbox.close()
        self.chain.close()
        if self.chain.privacy is not None:
            self.chain.privacy.wipe()

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

from codemode.bridge.host import ToolAccess
from codemode.engine.approvals import PendingApproval
from codemode.engine.chain import InvokerChain
from codemode.engine.invoker import cancellable
from codemode.engine.life import Life, refusal
from codemode.engine.output import OutputCallback, ScannedOutput
from codemode.engine.views import CatalogViews
from codemode.errors import SessionError, SessionStateError, WorkspaceFileError
from codemode.files import WorkspaceFile, list_workspace, render_tree
from codemode.files.access import enter_dir, enter_fresh_dir, write_output_file
from codemode.memory.learning import FixLearner
from codemode.policy.approval import ApprovalDecision, ApprovalRequest
from codemode.sandbox.provider import SessionSandbox
from codemode.sandbox.reports import Restore
from codemode.sandbox.result import ExecutionResult, whole_text
from codemode.skills.session import describe_restore

__all__ = ["Session"]

# The reports a result carries whose values can hold what the code wrote (names, text).
# The keys of a result's tables (files, tool calls, truncation, the error): the host's words,
# which no scan need look at (the tool and file names under them are still scanned).
_RESULT_KEYS = frozenset(
    {
        *("created", "modified", "deleted", "files"),
        *("count", "failures", "refused", "by_tool", "calls"),
        *("stdout_bytes", "stderr_bytes", "stdout_total_bytes", "stderr_total_bytes"),
        *("type", "message", "line", "traceback", "tool"),
    }
)
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
    # Checkouts by the registry (executions, and its own idle release); a busy session never
    # expires. Counted by the registry, under its lock.
    busy: int = 0
    # Remembers how this owner fixed errors, and offers the fix when one comes back.
    fixes: FixLearner | None = None
    # False for sandboxes without a workspace of their own (the in-process twin).
    has_workspace: bool = True
    # The code of the execution running now (for the fix memory).
    code: str = field(default="", init=False)
    # Project mode: the task's folder (``fresh_dir``), relative to the workspace.
    task_dir: str | None = field(default=None, init=False)
    # The life cycle (``codemode.engine.life``), moved only by the methods below: executions
    # begun and not yet ended (completed, or cancelled), cancelled ones still stopping, the
    # one paused for an approval and the request it waits on.
    _active: int = field(default=0, init=False, repr=False)
    _stopping: int = field(default=0, init=False, repr=False)
    _paused: asyncio.Future[ExecutionResult] | None = field(default=None, init=False, repr=False)
    _request: ApprovalRequest | None = field(default=None, init=False, repr=False)
    _closed: bool = field(default=False, init=False, repr=False)
    # The newest execution's stop signal.
    _cancel: threading.Event | None = field(default=None, init=False, repr=False)
    # The last cancelled execution's finished result, until the next execution reports it.
    _cancelled: ExecutionResult | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    # The tools made for the last catalog views an execution ran with (``_access``).
    _tools: tuple[CatalogViews, InvokerChain, ToolAccess] | None = field(
        default=None, init=False, repr=False
    )

    # --- the life cycle ---------------------------------------------------------------------

    @property
    def state(self) -> Life:
        """Where the session is in its life (``RELEASED``: idle, its sandbox given back)."""
        if self._closed:
            return Life.CLOSED
        if self._paused is not None:
            return Life.PAUSED
        if self._active:
            return Life.RUNNING
        if self._stopping:
            return Life.CANCELLED
        return Life.RELEASED if self.sandbox.released else Life.IDLE

    @property
    def paused(self) -> asyncio.Future[ExecutionResult] | None:
        """The execution waiting for an approval, if one is."""
        return self._paused

    @property
    def cancel_event(self) -> threading.Event | None:
        """The newest execution's stop signal (``cancel`` sets it)."""
        return self._cancel

    def _refuse(self, move: str, detail: str = "") -> SessionStateError:
        return refusal(move, self.state, self.handle, detail)

    def _running_unpaused(self) -> int:
        return self._active - (self._paused is not None)

    def begin(self, code: str) -> threading.Event:
        """An execution of ``code`` starts (while another runs or stops, it waits for the
        sandbox): its stop signal. Refused while paused for an approval, or closed."""
        with self._lock:
            state = self.state
            if state in (Life.PAUSED, Life.CLOSED):
                request = self._request if state is Life.PAUSED else None
                raise self._refuse("begin", f" ({request.id})" if request else "")
            self._active += 1
            self.code = code
            self._cancel = threading.Event()
            return self._cancel

    def pause(self, job: asyncio.Future[ExecutionResult], request: ApprovalRequest) -> None:
        """The running execution ``job`` waits at a call for ``request`` to be decided."""
        with self._lock:
            if self._closed:
                return  # closed under it (AFTER_CLOSE): its wait was denied
            if self._paused is not None or self._active == 0:
                raise self._refuse("pause")
            self._paused, self._request = job, request

    def resume(self, decision: ApprovalDecision) -> asyncio.Future[ExecutionResult]:
        """``decision`` answered the request the session waits on: the execution runs on."""
        with self._lock:
            request, job = self._request, self._paused
            if job is None or request is None:
                raise self._refuse("resume")
            if decision.approval_id != request.id:
                raise self._refuse("resume", f" on approval {request.id[:16]!r}, not this one")
            self._paused, self._request = None, None
            return job

    def complete(self) -> None:
        """A running execution ended (its result goes to its caller)."""
        with self._lock:
            if self._closed:
                return  # closed under it (AFTER_CLOSE)
            if self._running_unpaused() == 0:
                raise self._refuse("complete")
            self._active -= 1

    def cancel(self, signal: threading.Event | None = None) -> None:
        """A running execution's caller cancelled or went away: stop its code. ``signal``:
        that execution's stop signal (``begin`` gave it), by default the newest one's."""
        with self._lock:
            if not self._closed:
                if self._running_unpaused() == 0:
                    raise self._refuse("cancel")
                self._active -= 1
                self._stopping += 1
            stop = signal or self._cancel
            if stop is not None:
                stop.set()

    def stopped(self, result: ExecutionResult | None) -> None:
        """A cancelled execution's code stopped; ``result`` (finished) is kept for the next
        execution to report."""
        with self._lock:
            if self._closed:
                return  # nobody is left to report to (AFTER_CLOSE)
            if self._stopping == 0:
                raise self._refuse("end a cancelled execution", " (none is stopping)")
            self._stopping -= 1
            if result is not None:
                self._cancelled = result

    def take_cancelled(self) -> ExecutionResult | None:
        """The result of the last cancelled execution, once (the next result reports it)."""
        with self._lock:
            cancelled, self._cancelled = self._cancelled, None
            return cancelled

    def release(self, still_idle: Callable[[], bool]) -> bool:
        """Checkpoint and stop the sandbox of this idle session (blocking: call it from a
        worker thread); see ``SessionSandbox.release``. False, and nothing released, when an
        execution runs or nothing is left to release; refused while paused or closed."""
        with self._lock:
            state = self.state
            if state in (Life.RUNNING, Life.CANCELLED, Life.RELEASED):
                return False  # an execution came in meanwhile, or nothing is left to release
            if state is not Life.IDLE:
                raise self._refuse("release")
        # An execution that begins from here on waits for the release, then restores.
        released = self.sandbox.release(still_idle)
        if released and self.chain.privacy is not None:
            self.chain.privacy.drop_caches()
        return released

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
        tools = self._access(views)
        self.code = code
        restored: Restore | None = None  # the fresh_dir step's restore, if it made one
        if fresh_dir:
            if not self.has_workspace:
                raise SessionError(
                    "fresh_dir needs a sandbox with a workspace; this one has none",
                    fix="run codemode with its isolated sandbox (the default backend)",
                )
            self.task_dir, restored = enter_fresh_dir(
                self.sandbox, modules=views.modules, fresh=fresh, packages=tools.packages
            )
            fresh = False
        elif fresh and self.task_dir is not None:
            # A new interpreter starts in the workspace: the task goes on in its folder.
            restored = enter_dir(
                self.sandbox,
                self.task_dir,
                modules=views.modules,
                fresh=True,
                packages=tools.packages,
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
            self.chain.sync()
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

    def _access(self, views: CatalogViews) -> ToolAccess:
        """What this session's executions reach through ``views``: made once per version of
        the catalog (the same object each time lets the sandbox's wrapping be kept too)."""
        chain = self.chain
        made = self._tools
        if made is not None and made[0] is views and made[1] is chain:
            return made[2]
        tools = views.access(chain.invoker, chain.on_refused, chain.packages)
        self._tools = (views, chain, tools)
        return tools

    def live_counts(self) -> tuple[int, int]:
        """(tool calls, bytes printed) of the running execution, read from any thread."""
        return self.sandbox.live_counts()

    @property
    def released(self) -> bool:
        """Its sandbox was released while idle; the next execution restores it."""
        return self.sandbox.released

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
        """The one place a raw outcome becomes what the client sees: the handle, the grants
        this session remembers, a fix remembered for its error, and the second privacy net
        over every field the code could fill (output, hint, every field of the error, file
        names, tool-call names, the limit and every report that can carry its text)."""
        grants = self.chain.grants.snapshot() if len(self.chain.grants) else result.grants
        hint = result.hint
        if self.fixes is not None and (earlier := self.fixes.observe(self.code, result)):
            hint = f"{hint} This error was fixed before with:\n{earlier}".strip()
        privacy = self.chain.privacy
        if privacy is None:
            return replace(result, session=self.handle, grants=grants, hint=hint)
        scan, scan_value = privacy.scan_output, privacy.scan_value
        ours = _RESULT_KEYS
        reports = {name: getattr(result, name) for name in _USER_TEXT_REPORTS} | {"grants": grants}
        return replace(  # one copy of the thirty fields, not two
            result,
            session=self.handle,
            stdout=scan(result.stdout),
            stderr=scan(result.stderr),
            hint=scan(hint),
            limit=None if result.limit is None else scan(result.limit),
            error=scan_value(result.error, plain_keys=ours) if result.error else result.error,
            files=scan_value(result.files, plain_keys=ours),
            tool_calls=scan_value(result.tool_calls, plain_keys=ours),
            truncated=scan_value(result.truncated, plain_keys=ours),
            # A report not made stays None (most are, in most results): nothing to scan.
            **{name: scan_value(value) for name, value in reports.items() if value is not None},
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
        with self._lock:
            self._closed = True
        self.sandbox.close()
        self.chain.close()
        if self.chain.privacy is not None:
            self.chain.privacy.wipe()

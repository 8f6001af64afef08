"""The codemode engine: catalog + generated API + search + sandbox sessions, in one object.

The MCP gateway, the CLI and the agent loop are all clients of this class::

    async with Codemode(load_config(path)) as engine:
        answer = await engine.search("create an issue")
        result = await engine.execute("from servers import github\\n...")
        again = await engine.execute("print(x)", session=result.session)
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from codemode.catalog.catalog import Catalog
from codemode.catalog.loading import catalog_from_config
from codemode.catalog.observed import SHAPES_FILE, ShapeBook
from codemode.checks.calls import check_calls
from codemode.checks.result import rejected_result
from codemode.checks.runtime import explain_call_error
from codemode.config import CodemodeConfig
from codemode.engine.approvals import ApprovalBroker, PendingApproval, SessionApprover
from codemode.engine.chain import build_invoker_chain
from codemode.engine.egress import audit_egress
from codemode.engine.idle import upkeep
from codemode.engine.invoker import CatalogInvoker
from codemode.engine.output import OutputCallback
from codemode.engine.progress import Progress, cancel_report, wait_reporting
from codemode.engine.provision import open_sandboxes
from codemode.engine.registry import SessionRegistry
from codemode.engine.searching import SearchAnswer, SearchMixin
from codemode.engine.session import Session
from codemode.engine.sharing import SharingMixin
from codemode.engine.threads import WorkerThreads
from codemode.engine.views import CatalogViews
from codemode.engine.workspace import WorkspaceFilesMixin
from codemode.errors import (
    CodemodeError,
    SandboxError,
    SessionError,
    UnknownSessionError,
)
from codemode.memory.fixes import FixMemory, SQLiteFixes
from codemode.memory.learning import FixLearner
from codemode.sandbox.backends import SandboxBackend
from codemode.sandbox.provider import SandboxProvider, SessionSandbox
from codemode.sandbox.result import ExecutionResult
from codemode.state.open import open_state_store
from codemode.state.tiered import TieredStore
from codemode.state.tools import STATE_SERVER, StateTools
from codemode.tools import ToolSpec

if TYPE_CHECKING:
    from codemode.audit import AuditLog
    from codemode.search.base import SearchIndex
    from codemode.skills.runtime import SkillsRuntime

__all__ = ["Codemode", "SearchAnswer"]

_T = TypeVar("_T")


class Codemode(SearchMixin, WorkspaceFilesMixin, SharingMixin):
    def __init__(
        self,
        config: CodemodeConfig,
        *,
        openapi_specs: Sequence[Path] = (),
        catalog: Catalog | None = None,
        backend: SandboxBackend | None = None,
        sandboxes: SandboxProvider | None = None,
        semantic: bool | None = None,
        audit: bool = True,
        audit_log: AuditLog | None = None,
    ) -> None:
        self.config = config
        self.catalog = catalog or catalog_from_config(config, openapi_specs)
        self.catalog.policy = self.catalog.policy or config.policy  # its startup warning's
        self.backend = backend
        self.semantic = semantic
        # Where sessions get their sandbox; by default a warm pool of isolated ones.
        self.sandboxes: SandboxProvider | None = sandboxes
        self.registry: SessionRegistry | None = None
        self._invoker: CatalogInvoker | None = None
        self._views: CatalogViews | None = None
        self._views_lock = threading.Lock()
        self._index: SearchIndex | None = None
        # The full index being built in the background, and a lexical one to answer meanwhile.
        self._index_job: asyncio.Task[SearchIndex] | None = None
        self._lexical: SearchIndex | None = None
        # Executions block a thread each (one per session holding a sandbox), and as many
        # may wait for a sandbox at once (refused, or releasing an idle one: make_room).
        self._threads = WorkerThreads(2 * config.gateway.max_sessions)
        self._expiry: asyncio.Task[None] | None = None
        self.approvals = ApprovalBroker()
        self.audit = audit
        self.audit_log: AuditLog | None = audit_log
        self._digest_key: bytes | None = None
        self.state_store: TieredStore | None = None
        self.fix_memory: FixMemory | None = None
        # The result shapes of tools with no output schema, as the sandbox received them.
        self.shapes: ShapeBook | None = None
        # Saved skills and session checkpoints (set by start()).
        self.skills: SkillsRuntime | None = None
        self._stopping = False
        self._resuming: set[str] = set()

    # --- life cycle -------------------------------------------------------------------------

    async def start(self) -> Codemode:
        """Start the sandbox pool and list every upstream (a dead one is reported, not fatal).
        If starting fails, whatever had started is stopped again."""
        try:
            return await self._start()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.aclose()
            raise

    async def _start(self) -> Codemode:
        if self.sandboxes is None:
            self.sandboxes, self.backend = await open_sandboxes(self.config, self.backend)
        gateway = self.config.gateway
        self.registry = SessionRegistry(
            self._new_session,
            idle_timeout_s=gateway.session_idle_timeout_s,
            max_sessions=gateway.max_sessions,
            max_per_client=gateway.max_sessions_per_client,
            max_stored=gateway.max_stored_sessions,
            evict_idle=gateway.idle_release_s > 0,
        )
        self.registry.on_close.append(self._session_closed)
        if gateway.shared_store:  # stateless replicas: see codemode.replicas
            await self._share_state()
        if self.audit_log is None and self.audit:
            await anyio.to_thread.run_sync(self._open_audit_log)
        audit_egress(self.backend, self.audit_log, self._digest_key)  # its connections
        state_dir = self.config.gateway.state_dir
        self.state_store = await anyio.to_thread.run_sync(
            open_state_store, self.config.state, state_dir
        )
        self.fix_memory = await anyio.to_thread.run_sync(SQLiteFixes, state_dir / "fixes.sqlite")
        self.shapes = await anyio.to_thread.run_sync(ShapeBook, state_dir / SHAPES_FILE)
        self._invoker = CatalogInvoker(self.catalog, asyncio.get_running_loop())
        self.skills = await anyio.to_thread.run_sync(self._open_skills)
        await self.catalog.load()  # each failure is logged once, by the catalog
        await anyio.to_thread.run_sync(self._current_views)
        self._expiry = asyncio.create_task(upkeep(self.registry, gateway.idle_release_s))
        return self

    # --- search only (the CLI): no sandboxes ---------------------------------------------

    async def open_for_search(self) -> dict[str, str]:
        """Load the catalog (and the observed result shapes) for ``search`` alone: no sandbox
        pool, sessions or audit log.
        Returns the servers that failed to load (name -> reason). ``aclose()`` when done."""
        failures = await self.catalog.load()  # each failure is logged once, by the catalog
        shapes_file = self.config.gateway.state_dir / SHAPES_FILE  # shown at detail "full"
        self.shapes = await anyio.to_thread.run_sync(ShapeBook, shapes_file)
        await anyio.to_thread.run_sync(self._current_views)
        return failures

    async def aclose(self) -> None:
        self._stopping = True  # sessions closed by a shutdown keep their checkpoints
        if self._expiry is not None:
            self._expiry.cancel()
        if self.registry is not None:
            await anyio.to_thread.run_sync(self.registry.close_all)
        if self.sandboxes is not None:
            await anyio.to_thread.run_sync(self.sandboxes.close)
        self._threads.close()
        if self.audit_log is not None:
            self.audit_log.close()
        if self.shared is not None:
            await anyio.to_thread.run_sync(self.shared.close)
        if self.state_store is not None:
            await anyio.to_thread.run_sync(self.state_store.close)
        if self.fix_memory is not None:
            self.fix_memory.close()
        await self.catalog.aclose()

    async def __aenter__(self) -> Codemode:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- views of the catalog: stubs, search index, grants ---------------------------------

    def _current_views(self) -> CatalogViews:
        with self._views_lock:
            views = self._views
            if views is None or views.version != self.catalog.version:
                version = self.catalog.version
                specs, down = self.catalog.specs(), self.catalog.unavailable()
                views = CatalogViews.build(specs, version, down, self.shapes, self.config.policy)
                self._views = views
                # Built on the first search or by build_search_index: execute never needs it.
                self._index = self._lexical = None
            return views

    async def views(self) -> CatalogViews:
        """The generated modules and granted tools for the catalog as it is now."""
        views = self._views
        if views is not None and views.version == self.catalog.version:
            return views
        return await anyio.to_thread.run_sync(self._current_views)

    # --- the meta-tools: search, execute, approve ----------------------------------------

    async def execute(
        self,
        code: str,
        *,
        session: str | None = None,
        fresh: bool = False,
        timeout_s: float | None = None,
        owner: str | None = None,
        client: str | None = None,
        progress: Progress | None = None,
        opened: Callable[[str], object] | None = None,
        check: bool = True,
        fresh_dir: bool = False,
        on_output: OutputCallback | None = None,
    ) -> ExecutionResult:
        """Run ``code`` in a session (a new one when ``session`` is None, counted against
        ``client``'s session quota). ``opened`` hears the session's handle before the code
        runs, so a caller that cancels still knows which session the code ran in.

        Returns ``approval_required`` when the code reached a call a human must approve;
        ``approve`` then resumes the same execution. With ``check`` (the default) calls on
        ``servers.*`` are checked against their signatures first: a wrong one is an error
        result with its line, and nothing runs. With ``fresh_dir`` the task starts in a new
        folder of the workspace (``tasks/NNN``) and the results show the workspace's tree.
        ``on_output(stream, data)`` sees the output
        as it is written (see ``codemode.engine.output``), also after an approval. If this
        call is cancelled (the client cancelled or went away), the code is stopped and no tool
        call starts after that; the next result in the session reports what the cancelled one
        did.
        """
        if self.registry is None:
            raise SandboxError("the engine is not started", fix="call `await engine.start()`")
        views = await self.views()
        record = await self._checkout(session, owner, client)
        if opened is not None:
            opened(record.handle)
        if record.paused is not None:
            self.registry.release(record)
            pending = self.approvals.pending_for(record.handle)
            raise SessionError(
                "this session is paused, waiting for an approval"
                + (f" ({pending.id})" if pending else ""),
                fix="call approve with that approval id (allow true or false) first",
            )
        if check and (problems := check_calls(code, views.signatures)):
            self.registry.release(record)
            record.code = code
            return record.finish(rejected_result(problems))

        cancel = record.cancel = threading.Event()
        registry = self.registry

        def run() -> ExecutionResult:
            registry.make_room(record)  # may release an idle session's sandbox first
            return record.run(
                code,
                views,
                fresh=fresh,
                timeout_s=timeout_s,
                on_output=on_output,
                cancel=cancel,
                fresh_dir=fresh_dir,
            )

        job = asyncio.create_task(self._threads.run(run))
        result = await self._follow(record, job, progress)
        explain_call_error(result, views.signatures)
        return result

    async def _checkout(
        self, handle: str | None, owner: str | None, client: str | None = None
    ) -> Session:
        """The session for ``handle``; one lost to a gateway restart resumes from its
        checkpoint (the result then says what was restored)."""
        assert self.registry is not None
        try:
            return self.registry.checkout(handle, owner, client)
        except UnknownSessionError:
            skills = self.skills
            if handle is None or skills is None:
                raise
            if not await anyio.to_thread.run_sync(skills.resumable, handle, owner):
                raise
        self._resuming.add(handle)
        try:
            return await anyio.to_thread.run_sync(self.registry.resume, handle, owner)
        finally:
            self._resuming.discard(handle)

    async def approve(
        self,
        approval_id: str,
        allow: bool,
        *,
        owner: str | None = None,
        digest: str | None = None,
        progress: Progress | None = None,
        remember: str = "call",
    ) -> ExecutionResult:
        """Answer a pending approval and wait for the resumed execution (or its next pause).
        The call runs only if its arguments are still exactly those shown (and match
        ``digest`` when given). ``remember``: "call", "tool" (this tool, for the rest of the
        session) or "server" (this server's calls of the same kind, read-only or not)."""
        if self.registry is None:
            raise SandboxError("the engine is not started", fix="call `await engine.start()`")
        # With a shared store: decided once cluster-wide, resumed where it is paused.
        answer = self.shared.link.approve if self.shared is not None else self.resume_approved
        return await answer(
            approval_id, allow, owner=owner, digest=digest, progress=progress, remember=remember
        )

    async def _follow(
        self,
        record: Session,
        job: asyncio.Task[ExecutionResult],
        progress: Progress | None = None,
    ) -> ExecutionResult:
        """Wait until the execution finishes or pauses for an approval, whichever is first,
        reporting progress meanwhile."""
        assert self.registry is not None
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        attention: asyncio.Future[PendingApproval] = loop.create_future()

        def settle(pending: PendingApproval) -> None:
            if not attention.done():
                attention.set_result(pending)

        def notice(pending: PendingApproval) -> None:
            loop.call_soon_threadsafe(settle, pending)

        cancel = record.cancel  # this execution's: a later one on the session has its own
        self.approvals.listen(record.handle, notice)
        already = self.approvals.pending_for(record.handle)
        if already is not None:
            notice(already)

        def describe(elapsed: float) -> tuple[float, float | None, str]:
            calls, printed = record.live_counts()
            return (
                round(elapsed, 3),
                None,
                f"running {elapsed:.0f} s: {calls} tool call(s), {printed} bytes printed",
            )

        try:
            waiting: list[asyncio.Future[Any]] = [job, attention]
            interval = self.config.gateway.progress_interval_s
            await wait_reporting(waiting, progress, interval, describe)
        except asyncio.CancelledError:
            # The caller cancelled or went away: stop the code (no tool call starts after
            # this), release the session when it has stopped, and keep its result for the
            # next execution to report.
            self._abandon(record, job, cancel)
            raise
        finally:
            self.approvals.unlisten(record.handle)
        if not job.done():
            record.paused = job
            return record.approval_result(
                attention.result(),
                round((time.monotonic() - started) * 1000, 3),
                spill_dir=self.config.gateway.state_dir / "approvals",
            )
        record.paused = None
        self.registry.release(record)
        result = record.finish(job.result())
        earlier, record.cancelled = record.cancelled, None
        if earlier is not None:
            result.extra["cancelled_before"] = cancel_report(earlier)
            result.hint = f"The previous execution was cancelled: {earlier.hint} {result.hint}"
            result.hint = result.hint.strip()
        return result

    def _abandon(
        self,
        record: Session,
        job: asyncio.Task[ExecutionResult],
        cancel: threading.Event | None,
    ) -> None:
        if cancel is not None:
            cancel.set()
        # A call waiting for a human is refused: its thread must not wait for an answer.
        self.approvals.cancel_session(record.handle)
        registry = self.registry
        assert registry is not None

        def stopped(done: asyncio.Task[ExecutionResult]) -> None:
            record.paused = None
            registry.release(record)
            if not done.cancelled() and done.exception() is None:
                record.cancelled = record.finish(done.result())

        job.add_done_callback(stopped)

    def _new_session(self, handle: str, owner: str | None) -> Session:
        assert self.sandboxes is not None and self._invoker is not None  # set by start()
        assert self.state_store is not None
        state = StateTools(
            self.state_store,
            session=handle,
            owner=owner,
            max_value_bytes=self.config.state.max_value_bytes,
            session_ttl_s=self.config.state.session_ttl_s,
        )
        chain = build_invoker_chain(
            self.config,
            self._invoker,
            session=handle,
            specs=self._spec_or_none,
            approver=SessionApprover(self.approvals, handle, owner),
            audit_log=self.audit_log,
            digest_key=self._digest_key,
            builtins={STATE_SERVER: state},
            shapes=self.shapes,
            stores=self.session_stores,
        )
        sandbox: SessionSandbox = self.sandboxes.open(handle)
        if self.skills is not None:
            restore = handle in self._resuming
            sandbox = self.skills.wrap(sandbox, handle, owner, chain.invoker, restore=restore)
        session = Session(handle, owner, sandbox, chain)
        session.has_workspace = self.sandboxes.has_workspace
        if self.fix_memory is not None:
            scrub = chain.privacy.scan_output if chain.privacy is not None else str
            session.fixes = FixLearner(self.fix_memory, owner, scrub)
        return session

    def _open_skills(self) -> SkillsRuntime:
        from codemode.skills.runtime import SkillsRuntime

        assert self.sandboxes is not None and self._invoker is not None
        assert self.state_store is not None
        tests_chain = build_invoker_chain(
            self.config,
            self._invoker,
            session="skill-tests",
            specs=self._spec_or_none,
            approver=None,
            audit_log=self.audit_log,
            digest_key=self._digest_key,
        )
        sandboxes = self.sandboxes
        isolated = sandboxes is not None and sandboxes.isolated
        return SkillsRuntime.open(
            self.config,
            self.state_store,
            sandboxes,
            lambda invoker: self._current_views().access(invoker),
            tests_chain.invoker,
            isolated=isolated,
            checkpoints=self.shared.checkpoints if self.shared is not None else None,
            specs=self.catalog.specs,
            version=lambda: self.catalog.version,
        )

    def _session_closed(self, session: Session) -> None:
        self.approvals.cancel_session(session.handle)
        if self._stopping:
            return  # a shutdown keeps what a resumed session needs: checkpoint and kv values
        if self.skills is not None:
            self.skills.forget(session.handle)
        if self.state_store is not None:
            self.state_store.delete_prefix(f"s:{session.handle}:")

    def _spec_or_none(self, server: str, tool: str) -> ToolSpec | None:
        try:
            return self.catalog.get(server, tool)
        except CodemodeError:
            return None

    def _open_audit_log(self) -> None:
        from codemode.audit.opening import open_audit_log

        self.audit_log, self._digest_key = open_audit_log(
            self.config.gateway.state_dir, self.config.audit
        )

    async def close_session(self, handle: str) -> bool:
        if self.registry is None:
            return False
        return await anyio.to_thread.run_sync(self.registry.close, handle)

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

import anyio
import anyio.to_thread

from codemode.catalog.catalog import Catalog
from codemode.catalog.loading import catalog_from_config
from codemode.catalog.observed import SHAPES_FILE, ShapeBook
from codemode.checks.calls import check_calls
from codemode.checks.result import rejected_result
from codemode.checks.runtime import explain_errors
from codemode.config import CodemodeConfig
from codemode.engine.approvals import ApprovalBroker, SessionApprovalGate
from codemode.engine.chain import build_invoker_chain
from codemode.engine.egress import audit_egress
from codemode.engine.factories import parts_factory
from codemode.engine.follow import Follower
from codemode.engine.idle import upkeep
from codemode.engine.invoker import CatalogInvoker
from codemode.engine.output import OutputCallback
from codemode.engine.parts import PartsFactory, SessionParts, Wiring
from codemode.engine.progress import Progress
from codemode.engine.provision import open_sandboxes, open_skills
from codemode.engine.registry import SessionRegistry, SessionState
from codemode.engine.searching import EngineSearch, SearchAnswer
from codemode.engine.session import Session
from codemode.engine.threads import WorkerThreads
from codemode.engine.views import CatalogViews, spec_lookup
from codemode.engine.workspace import WorkspaceFiles
from codemode.errors import SandboxError, SessionError, UnknownSessionError
from codemode.files import WorkspaceFile, WorkspaceListing
from codemode.files.access import READ_LIMIT
from codemode.memory import FixMemory, open_fixes
from codemode.memory.learning import FixLearner
from codemode.policy.approval import ApprovalDecision
from codemode.sandbox.backends import SandboxBackend
from codemode.sandbox.provider import SandboxProvider, SessionSandbox
from codemode.sandbox.result import ExecutionResult
from codemode.search.render import DEFAULT_HEAD
from codemode.state.open import open_state_store
from codemode.state.tiered import TieredStore
from codemode.state.tools import STATE_SERVER, StateTools, session_prefixes

if TYPE_CHECKING:
    from codemode.audit import AuditLog
    from codemode.engine.handover import Handover, SharedStore
    from codemode.policy.grants import Remember
    from codemode.search.base import SearchIndex
    from codemode.skills.runtime import SkillsRuntime

__all__ = ["Codemode", "SearchAnswer"]

_T = TypeVar("_T")


class Codemode:
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
        parts: PartsFactory | None = None,
        handover: Handover | None = None,
    ) -> None:
        """``parts`` builds the session registry, approval broker, session stores and audit
        log when the engine starts (default: shared ones with ``[gateway] shared_store``,
        else local ones). ``handover`` says what a replica does with a session another one
        ran last (None: restore it from its checkpoint)."""
        self.config = config
        self.catalog = catalog or catalog_from_config(config, openapi_specs)
        self.catalog.policy = self.catalog.policy or config.policy  # its startup warning's
        self.backend = backend
        self.semantic = semantic
        # Where sessions get their sandbox; by default a warm pool of isolated ones.
        self.sandboxes: SandboxProvider | None = sandboxes
        self._parts_factory = parts or parts_factory(config)
        # Built once by start(), never replaced.
        self.parts: SessionParts | None = None
        self.handover = handover
        self._invoker: CatalogInvoker | None = None
        self._specs = spec_lookup(self.catalog)
        self._views: CatalogViews | None = None
        self._views_lock = threading.Lock()
        self.searcher = EngineSearch(
            config,
            self.catalog,
            self.views,
            self._views_lock,
            lambda: self.skills,
            semantic=semantic,
        )
        # Executions block a thread each (one per session holding a sandbox), and as many
        # may wait for a sandbox at once (refused, or releasing an idle one: make_room).
        self._threads = WorkerThreads(2 * config.gateway.max_sessions)
        self._expiry: asyncio.Task[None] | None = None
        self.audit = audit
        self._given_audit_log = audit_log
        self.state_store: TieredStore | None = None
        self.fix_memory: FixMemory | None = None
        # The result shapes of tools with no output schema, as the sandbox received them.
        self.shapes: ShapeBook | None = None
        # Saved skills and session checkpoints (set by start()).
        self.skills: SkillsRuntime | None = None
        self._stopping = False
        self._resuming: set[str] = set()
        # Built by start() from the parts, never replaced.
        self._follower: Follower | None = None
        self._files: WorkspaceFiles | None = None

    # --- the parts sessions share (built by start) ------------------------------------------

    @property
    def registry(self) -> SessionRegistry | None:
        return self.parts.registry if self.parts is not None else None

    @property
    def approvals(self) -> ApprovalBroker:
        if self.parts is None:
            raise SandboxError("the engine is not started", fix="call `await engine.start()`")
        return self.parts.approvals

    @property
    def audit_log(self) -> AuditLog | None:
        return self.parts.audit_log if self.parts is not None else self._given_audit_log

    @property
    def shared(self) -> SharedStore | None:
        """The store replicas share, when ``[gateway] shared_store`` is set."""
        return self.parts.shared if self.parts is not None else None

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
        wiring = Wiring(
            self.config,
            self._new_session,
            self._session_closed,
            self._resuming,
            self.resume_approved,
            self.handover,
            self.audit,
            self._given_audit_log,
            asyncio.get_running_loop(),
        )
        parts = self.parts = await anyio.to_thread.run_sync(self._parts_factory, wiring)
        learn = self.searcher.learn
        self._follower = Follower(
            parts.registry, parts.approvals, gateway, lambda owner, r: learn(owner, r.tool_calls)
        )
        audit_egress(self.backend, parts.audit_log, parts.digest_key)  # its connections
        state_dir = self.config.gateway.state_dir
        self.state_store = await anyio.to_thread.run_sync(
            open_state_store, self.config.state, state_dir
        )
        self.fix_memory = await anyio.to_thread.run_sync(open_fixes, self.state_store, state_dir)
        self.shapes = await anyio.to_thread.run_sync(ShapeBook, state_dir / SHAPES_FILE)
        self._invoker = CatalogInvoker(self.catalog, asyncio.get_running_loop())
        assert self.sandboxes is not None and self.state_store is not None
        self.skills = await anyio.to_thread.run_sync(
            open_skills,
            self.config,
            self.catalog,
            parts,
            self._invoker,
            self.sandboxes,
            self.state_store,
            lambda invoker: self._current_views().access(invoker),
            self._specs,
        )
        self._files = WorkspaceFiles(parts.registry, self.skills, self._threads, self.views)
        await self.catalog.load()  # each failure is logged once, by the catalog
        await anyio.to_thread.run_sync(self._current_views)
        self._expiry = asyncio.create_task(upkeep(parts.registry, gateway.idle_release_s))
        return self

    # --- search only (the CLI): no sandboxes ---------------------------------------------

    async def open_for_search(self) -> dict[str, str]:
        """Load the catalog (and the observed result shapes) for ``search`` alone, with no
        sandbox pool, sessions or audit log: the servers that failed to load (name -> reason)."""
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
        if self.parts is not None:
            await anyio.to_thread.run_sync(self.parts.close)
        elif self._given_audit_log is not None:
            self._given_audit_log.close()
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
                self.searcher.forget_index()
            return views

    async def views(self) -> CatalogViews:
        """The generated modules and granted tools for the catalog as it is now."""
        views = self._views
        if views is not None and views.version == self.catalog.version:
            return views
        return await anyio.to_thread.run_sync(self._current_views)

    # --- search (``searcher``) and workspace files, answered by the parts that own them -----

    async def search(
        self,
        query: str,
        *,
        detail: str = "summary",
        limit: int = DEFAULT_HEAD,
        part: int = 1,
        owner: str | None = None,
        progress: Progress | None = None,
    ) -> SearchAnswer:
        """Tools for ``query``, and below them the owner's saved skills that match."""
        return await self.searcher.search(
            query, detail=detail, limit=limit, part=part, owner=owner, progress=progress
        )

    def build_search_index(self) -> asyncio.Task[SearchIndex]:
        """Start building the search index in the background (see ``EngineSearch``)."""
        return self.searcher.build_search_index()

    def note_index_stage(self, stage: str, percent: float) -> None:
        self.searcher.note_index_stage(stage, percent)

    @property
    def index_progress(self) -> Callable[[str, float], None] | None:
        """Who else hears the index build's (stage, percent) (``serve`` prints it)."""
        return self.searcher.index_progress

    @index_progress.setter
    def index_progress(self, listener: Callable[[str, float], None] | None) -> None:
        self.searcher.index_progress = listener

    def session_handles(self, owner: str | None, *, idle_only: bool = False) -> list[str]:
        """The open sessions of ``owner`` (``idle_only``: not running code now)."""
        return self.registry.handles(owner, idle_only=idle_only) if self.registry else []

    def session_states(self, owner: str | None) -> dict[str, SessionState]:
        """Each open session of ``owner`` and what it is doing (``released``: its sandbox was
        given back while idle; the next execution restores it)."""
        return self.registry.states(owner) if self.registry is not None else {}

    async def list_files(self, session: str, *, owner: str | None = None) -> WorkspaceListing:
        """The files, folders and links in a session's workspace (read inside its sandbox)."""
        return await self._started(self._files).list_files(session, owner=owner)

    async def read_file(
        self, session: str, path: str, *, owner: str | None = None, limit: int = READ_LIMIT
    ) -> WorkspaceFile:
        """One regular file of a session's workspace (at most ``limit`` bytes; links refused)."""
        files = self._started(self._files)
        return await files.read_file(session, path, owner=owner, limit=limit)

    @staticmethod
    def _started(part: _T | None) -> _T:
        if part is None:
            raise SandboxError("the engine is not started", fix="call `await engine.start()`")
        return part

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
        """Run ``code`` in a session (a new one, counted against ``client``'s quota, when
        ``session`` is None); ``opened`` hears its handle before the code runs.
        ``approval_required``: the code reached a call a human must approve; ``decide`` (or
        ``approve``) resumes the same execution. With ``check`` (the default) calls on
        ``servers.*`` are checked against their signatures first: a wrong one is an error
        result with its line, and nothing runs. With ``fresh_dir`` the task starts in a new
        folder of the workspace (``tasks/NNN``) and the results show the workspace's tree.
        ``on_output(stream, data)`` sees the output as it is written, also after an approval.
        Cancelled (or its client gone), the code stops and no tool call starts after that; the
        next result in the session reports what it did."""
        if self.registry is None:
            raise SandboxError("the engine is not started", fix="call `await engine.start()`")
        views = await self.views()
        record = await self._checkout(session, owner, client)
        if opened is not None:
            opened(record.handle)
        try:
            cancel = record.begin(code)  # refused while it runs or waits for an approval
        except SessionError:
            self.registry.release(record)
            raise
        if check and (problems := check_calls(code, views.signatures)):
            record.complete()
            self.registry.release(record)
            return record.finish(rejected_result(problems))
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

        job = self._threads.submit(run)  # queued now: a task would queue it a loop turn later
        result = await self._started(self._follower).follow(record, job, progress)
        explain_errors(result, views.signatures, self._specs)
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
        """``decide`` from plain values (``remember``: "call", "tool" or "server")."""
        decision = ApprovalDecision(approval_id, allow, cast("Remember", remember), digest, owner)
        return await self.decide(decision, progress)

    async def decide(
        self, decision: ApprovalDecision, progress: Progress | None = None
    ) -> ExecutionResult:
        """Answer a pending approval and follow the execution it resumes (to its next pause)."""
        # With a shared store: decided once cluster-wide, resumed where it is paused.
        answer = self.shared.link.approve if self.shared is not None else self.resume_approved
        return await answer(
            decision.approval_id,
            decision.allow,
            owner=decision.decided_by,
            digest=decision.digest,
            progress=progress,
            remember=decision.remember,
        )

    async def resume_approved(
        self,
        approval_id: str,
        allow: bool,
        *,
        owner: str | None = None,
        digest: str | None = None,
        progress: Progress | None = None,
        remember: str = "call",
    ) -> ExecutionResult:
        """Answer an approval pending in this engine and follow the execution it resumes."""
        decision = ApprovalDecision(approval_id, allow, cast("Remember", remember), digest, owner)
        return await self._started(self._follower).resume(decision, progress)

    def _new_session(self, handle: str, owner: str | None) -> Session:
        assert self.sandboxes is not None and self._invoker is not None  # set by start()
        assert self.state_store is not None
        state = StateTools(
            self.state_store,
            session=handle,
            owner=owner,
            max_value_bytes=self.config.state.max_value_bytes,
            session_ttl_s=self.config.state.session_ttl_s,
            quota=self.config.state.quota(),
        )
        chain = build_invoker_chain(
            self.config,
            self._invoker,
            session=handle,
            specs=self._specs,
            approver=SessionApprovalGate(self.approvals, handle, owner),
            audit_log=self.audit_log,
            digest_key=self.parts.digest_key if self.parts is not None else None,
            builtins={STATE_SERVER: state},
            shapes=self.shapes,
            stores=self.parts.stores if self.parts is not None else None,
            probes=self.parts.probe_ledgers.for_owner(owner) if self.parts is not None else None,
        )
        sandbox: SessionSandbox = self.sandboxes.open(handle)
        if self.skills is not None:
            restore = handle in self._resuming
            sandbox = self.skills.wrap(sandbox, handle, owner, chain.invoker, restore=restore)
        fixes = None
        if self.fix_memory is not None:
            scrub = chain.privacy.scan_output if chain.privacy is not None else str
            fixes = FixLearner(self.fix_memory, owner, scrub)
        workspace = self.sandboxes.has_workspace
        return Session(handle, owner, sandbox, chain, fixes=fixes, has_workspace=workspace)

    def _session_closed(self, session: Session) -> None:
        self.approvals.cancel_session(session.handle)
        if self._stopping:
            return  # a shutdown keeps what a resumed session needs: checkpoint and kv values
        if self.skills is not None:
            self.skills.forget(session.handle)
        if self.state_store is not None:
            for prefix in session_prefixes(session.handle):
                self.state_store.delete_prefix(prefix)

    async def close_session(self, handle: str) -> bool:
        if self.registry is None:
            return False
        return await anyio.to_thread.run_sync(self.registry.close, handle)

"""The codemode engine: catalog + generated API + search + sandbox sessions, in one object.

The MCP gateway, the CLI and the agent loop are all clients of this class::

    async with Codemode(load_config(path)) as engine:
        answer = await engine.search("create an issue")
        result = await engine.execute("from servers import github\\n...")
        again = await engine.execute("print(x)", session=result.session)
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from codemode.catalog.catalog import Catalog
from codemode.catalog.loading import catalog_from_config
from codemode.checks.calls import check_calls
from codemode.checks.result import rejected_result
from codemode.config import CodemodeConfig
from codemode.engine.approvals import ApprovalBroker, PendingApproval, SessionApprover
from codemode.engine.chain import build_invoker_chain
from codemode.engine.invoker import CatalogInvoker
from codemode.engine.output import OutputCallback
from codemode.engine.registry import SessionRegistry
from codemode.engine.session import Session
from codemode.engine.threads import WorkerThreads
from codemode.engine.views import CatalogViews
from codemode.errors import CodemodeError, SandboxError, SessionError
from codemode.memory.fixes import FixMemory, SQLiteFixes
from codemode.memory.learning import FixLearner
from codemode.sandbox.backends import SandboxBackend, make_backend
from codemode.sandbox.pool import SandboxPool
from codemode.sandbox.provider import PooledSandboxes, SandboxProvider
from codemode.sandbox.result import ExecutionResult
from codemode.state.open import open_state_store
from codemode.state.tiered import TieredStore
from codemode.state.tools import STATE_SERVER, StateTools
from codemode.tools import ToolSpec

if TYPE_CHECKING:
    from codemode.audit import AuditLog
    from codemode.search.base import SearchIndex

__all__ = ["Codemode", "SearchAnswer"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchAnswer:
    text: str
    hits: list[dict[str, Any]]


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
    ) -> None:
        self.config = config
        self.catalog = catalog or catalog_from_config(config, openapi_specs)
        self.backend = backend
        self.semantic = semantic
        # Where sessions get their sandbox; by default a warm pool of isolated ones.
        self.sandboxes: SandboxProvider | None = sandboxes
        self.registry: SessionRegistry | None = None
        self._invoker: CatalogInvoker | None = None
        self._views: CatalogViews | None = None
        self._views_lock = threading.Lock()
        self._index: SearchIndex | None = None
        # Executions block a thread each; at most one per session runs at once.
        self._threads = WorkerThreads(config.gateway.max_sessions)
        self._expiry: asyncio.Task[None] | None = None
        self.approvals = ApprovalBroker()
        self.audit = audit
        self.audit_log: AuditLog | None = audit_log
        self._digest_key: bytes | None = None
        self.state_store: TieredStore | None = None
        self.fix_memory: FixMemory | None = None

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
            backend = self.backend or make_backend(self.config.sandbox)
            pool = SandboxPool.from_settings(backend, self.config.sandbox).start()
            self.sandboxes = PooledSandboxes(pool)
        gateway = self.config.gateway
        self.registry = SessionRegistry(
            self._new_session,
            idle_timeout_s=gateway.session_idle_timeout_s,
            max_sessions=gateway.max_sessions,
        )
        self.registry.on_close.append(self._session_closed)
        if self.audit_log is None and self.audit:
            await anyio.to_thread.run_sync(self._open_audit_log)
        state_dir = self.config.gateway.state_dir
        self.state_store = await anyio.to_thread.run_sync(
            open_state_store, self.config.state, state_dir
        )
        self.fix_memory = await anyio.to_thread.run_sync(SQLiteFixes, state_dir / "fixes.sqlite")
        self._invoker = CatalogInvoker(self.catalog, asyncio.get_running_loop())
        failures = await self.catalog.load()
        for server, message in failures.items():
            log.warning("server %s is unavailable: %s", server, message)
        await anyio.to_thread.run_sync(self._current_views)
        self._expiry = asyncio.create_task(self._expire_loop())
        return self

    async def aclose(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        if self.registry is not None:
            await anyio.to_thread.run_sync(self.registry.close_all)
        if self.sandboxes is not None:
            await anyio.to_thread.run_sync(self.sandboxes.close)
        self._threads.close()
        if self.audit_log is not None:
            self.audit_log.close()
        if self.state_store is not None:
            await anyio.to_thread.run_sync(self.state_store.close)
        if self.fix_memory is not None:
            self.fix_memory.close()
        await self.catalog.aclose()

    async def __aenter__(self) -> Codemode:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _expire_loop(self) -> None:
        assert self.registry is not None
        interval = min(max(self.registry.idle_timeout_s / 4, 0.5), 60.0)
        while True:
            await asyncio.sleep(interval)
            await anyio.to_thread.run_sync(self.registry.expire_idle)

    # --- views of the catalog: stubs, search index, grants ---------------------------------

    def _current_views(self) -> CatalogViews:
        with self._views_lock:
            views = self._views
            if views is None or views.version != self.catalog.version:
                version = self.catalog.version
                views = self._views = CatalogViews.build(
                    self.catalog.specs(), version, self.catalog.unavailable()
                )
                self._index = None  # built on the first search: execute never needs it
            return views

    async def views(self) -> CatalogViews:
        """The generated modules and granted tools for the catalog as it is now."""
        views = self._views
        if views is not None and views.version == self.catalog.version:
            return views
        return await anyio.to_thread.run_sync(self._current_views)

    def _search_index(self) -> SearchIndex:
        with self._views_lock:
            if self._index is None:
                from codemode.search.semantic import build_index

                self._index = build_index(self.catalog.specs(), semantic=self.semantic)
            return self._index

    # --- the meta-tools: search, execute, approve ----------------------------------------

    async def search(self, query: str, *, detail: str = "summary", limit: int = 5) -> SearchAnswer:
        from codemode.search.render import check_detail, render_answer

        level = check_detail(detail)
        limit = max(1, min(int(limit), 50))
        views = await self.views()
        index = self._index
        if index is None:  # an empty index is falsy: test for None
            index = await anyio.to_thread.run_sync(self._search_index)
        hits = index.search(query, limit)
        text = render_answer(hits, level, source=views.stubs.tool_source)
        return SearchAnswer(text, [hit.to_json() for hit in hits])

    async def execute(
        self,
        code: str,
        *,
        session: str | None = None,
        fresh: bool = False,
        timeout_s: float | None = None,
        owner: str | None = None,
        check: bool = True,
        on_output: OutputCallback | None = None,
    ) -> ExecutionResult:
        """Run ``code`` in a session (a new one when ``session`` is None).

        Returns ``approval_required`` when the code reached a call a human must approve;
        ``approve`` then resumes the same execution. With ``check`` (the default) calls on
        ``servers.*`` are checked against their signatures first: a wrong one is an error
        result with its line, and nothing runs. ``on_output(stream, data)`` sees the output
        as it is written (see ``codemode.engine.output``), also after an approval.
        """
        if self.registry is None:
            raise SandboxError("the engine is not started", fix="call `await engine.start()`")
        views = await self.views()
        record = self.registry.checkout(session, owner)
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

        def run() -> ExecutionResult:
            return record.run(code, views, fresh=fresh, timeout_s=timeout_s, on_output=on_output)

        job = asyncio.create_task(self._threads.run(run))
        return await self._follow(record, job)

    async def approve(
        self, approval_id: str, allow: bool, *, owner: str | None = None
    ) -> ExecutionResult:
        """Answer a pending approval and wait for the resumed execution (or its next pause)."""
        if self.registry is None:
            raise SandboxError("the engine is not started", fix="call `await engine.start()`")
        pending = self.approvals.answer(approval_id, allow, owner)
        record = self.registry.get(pending.session, owner)
        job = record.paused
        if job is None:
            raise SessionError("that execution is no longer running")
        return await self._follow(record, job)

    async def _follow(self, record: Session, job: asyncio.Task[ExecutionResult]) -> ExecutionResult:
        """Wait until the execution finishes or pauses for an approval, whichever is first."""
        assert self.registry is not None
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        attention: asyncio.Future[PendingApproval] = loop.create_future()

        def settle(pending: PendingApproval) -> None:
            if not attention.done():
                attention.set_result(pending)

        def notice(pending: PendingApproval) -> None:
            loop.call_soon_threadsafe(settle, pending)

        self.approvals.listen(record.handle, notice)
        already = self.approvals.pending_for(record.handle)
        if already is not None:
            notice(already)
        try:
            waiting: list[asyncio.Future[Any]] = [job, attention]
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The caller went away (a client disconnected); the execution runs on in its
            # thread. Release the session when it ends, or it could never expire.
            registry = self.registry
            job.add_done_callback(lambda _: registry.release(record))
            raise
        finally:
            self.approvals.unlisten(record.handle)
        if not job.done():
            record.paused = job
            approval = attention.result().describe()
            return ExecutionResult.approval_required(
                approval, record.handle, round((time.monotonic() - started) * 1000, 3)
            )
        record.paused = None
        self.registry.release(record)
        return record.finish(job.result())

    def _new_session(self, handle: str, owner: str | None) -> Session:
        assert self.sandboxes is not None and self._invoker is not None  # set by start()
        assert self.state_store is not None
        state = StateTools(
            self.state_store,
            session=handle,
            owner=owner,
            max_value_bytes=self.config.state.max_value_bytes,
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
        )
        session = Session(handle, owner, self.sandboxes.open(handle), chain)
        if self.fix_memory is not None:
            scrub = chain.privacy.scan_output if chain.privacy is not None else str
            session.fixes = FixLearner(self.fix_memory, owner, scrub)
        return session

    def _session_closed(self, session: Session) -> None:
        self.approvals.cancel_session(session.handle)
        if self.state_store is not None:
            self.state_store.delete_prefix(f"s:{session.handle}:")

    def _spec_or_none(self, server: str, tool: str) -> ToolSpec | None:
        try:
            return self.catalog.get(server, tool)
        except CodemodeError:
            return None

    def _open_audit_log(self) -> None:
        from codemode.audit import SQLiteAuditLog

        state_dir = self.config.gateway.state_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        key_file = state_dir / "audit.key"
        if not key_file.exists():
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(secrets.token_bytes(32))
        self._digest_key = key_file.read_bytes()
        self.audit_log = SQLiteAuditLog(state_dir / "audit.sqlite")

    async def close_session(self, handle: str) -> bool:
        if self.registry is None:
            return False
        return await anyio.to_thread.run_sync(self.registry.close, handle)

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
from codemode.config import CodemodeConfig
from codemode.engine.approvals import ApprovalBroker, PendingApproval, SessionApprover
from codemode.engine.chain import build_invoker_chain
from codemode.engine.invoker import CatalogInvoker
from codemode.engine.registry import SessionRegistry
from codemode.engine.session import Session
from codemode.engine.views import CatalogViews
from codemode.errors import CodemodeError, SandboxError, SessionError
from codemode.sandbox.backends import SandboxBackend, make_backend
from codemode.sandbox.pool import SandboxPool
from codemode.sandbox.result import ExecutionResult
from codemode.sandbox.session import SandboxSession
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
        semantic: bool | None = None,
        audit: bool = True,
        audit_log: AuditLog | None = None,
    ) -> None:
        self.config = config
        self.catalog = catalog or catalog_from_config(config, openapi_specs)
        self.backend = backend
        self.semantic = semantic
        self.pool: SandboxPool | None = None
        self.registry: SessionRegistry | None = None
        self._invoker: CatalogInvoker | None = None
        self._views: CatalogViews | None = None
        self._views_lock = threading.Lock()
        self._index: SearchIndex | None = None
        self._limiter = anyio.CapacityLimiter(max(config.gateway.max_sessions, 1))
        self._expiry: asyncio.Task[None] | None = None
        self.approvals = ApprovalBroker()
        self.audit = audit
        self.audit_log: AuditLog | None = audit_log
        self._digest_key: bytes | None = None

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
        backend = self.backend or make_backend(self.config.sandbox)
        self.pool = SandboxPool(backend, self.config.sandbox.pool_size).start()
        gateway = self.config.gateway
        self.registry = SessionRegistry(
            self._new_session,
            idle_timeout_s=gateway.session_idle_timeout_s,
            max_sessions=gateway.max_sessions,
        )
        self.registry.on_close.append(lambda session: self.approvals.cancel_session(session.handle))
        if self.audit_log is None and self.audit:
            await anyio.to_thread.run_sync(self._open_audit_log)
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
        if self.pool is not None:
            await anyio.to_thread.run_sync(self.pool.close)
        if self.audit_log is not None:
            self.audit_log.close()
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
                views = self._views = CatalogViews.build(self.catalog.specs(), version)
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

    # --- the two meta-tools -----------------------------------------------------------------

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
    ) -> ExecutionResult:
        """Run ``code`` in a session (a new one when ``session`` is None).

        Returns ``approval_required`` when the code reached a call a human must approve;
        ``approve`` then resumes the same execution.
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

        def run() -> ExecutionResult:
            return record.run(code, views, fresh=fresh, timeout_s=timeout_s)

        job = asyncio.create_task(anyio.to_thread.run_sync(run, limiter=self._limiter))
        return await self._follow(record, job)

    async def approve(
        self,
        approval_id: str,
        allow: bool,
        *,
        owner: str | None = None,
        digest: str | None = None,
    ) -> ExecutionResult:
        """Answer a pending approval and wait for the resumed execution (or its next pause).

        An approval runs the call only if its arguments are still exactly those shown (and
        match ``digest``, the one from the approval_required result, when given)."""
        if self.registry is None:
            raise SandboxError("the engine is not started", fix="call `await engine.start()`")
        pending = self.approvals.answer(approval_id, allow, owner, digest=digest)
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
            return record.approval_result(
                attention.result(), round((time.monotonic() - started) * 1000, 3)
            )
        record.paused = None
        self.registry.release(record)
        return record.finish(job.result())

    def _new_session(self, handle: str, owner: str | None) -> Session:
        assert self.pool is not None and self._invoker is not None  # set by start()
        chain = build_invoker_chain(
            self.config,
            self._invoker,
            session=handle,
            specs=self._spec_or_none,
            approver=SessionApprover(self.approvals, handle, owner),
            audit_log=self.audit_log,
            digest_key=self._digest_key,
        )
        return Session(handle, owner, SandboxSession(self.pool, handle), chain)

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
        self.audit_log = SQLiteAuditLog(state_dir / "audit.sqlite", rotation=self.config.audit)

    async def close_session(self, handle: str) -> bool:
        if self.registry is None:
            return False
        return await anyio.to_thread.run_sync(self.registry.close, handle)

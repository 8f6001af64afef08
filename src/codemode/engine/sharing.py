"""The engine's side of stateless replicas (``[gateway] shared_store``, ``codemode.replicas``).

Without a shared store, sessions, approvals, vaults, budgets and the audit log live in this
process (``LocalSessionStores`` and the engine's own registry and broker). With one,
``_share_state`` swaps in the shared implementations before any session exists.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import anyio.to_thread

from codemode.config import CodemodeConfig
from codemode.engine.approvals import ApprovalBroker
from codemode.engine.progress import Progress
from codemode.engine.registry import SessionRegistry
from codemode.engine.session import Session
from codemode.engine.stores import LocalSessionStores, SessionStores
from codemode.errors import SessionError
from codemode.sandbox.result import ExecutionResult

if TYPE_CHECKING:
    from codemode.audit import AuditLog
    from codemode.replicas.attach import SharedState
    from codemode.replicas.registry import Handover

__all__ = ["SharingMixin"]


class SharingMixin:
    """Shared state for ``Codemode``; the attributes below are the engine's own."""

    config: CodemodeConfig
    registry: SessionRegistry | None
    approvals: ApprovalBroker
    audit: bool
    audit_log: AuditLog | None
    _digest_key: bytes | None
    _resuming: set[str]
    # Where sessions keep their vault and budget (shared with other replicas, or not).
    session_stores: SessionStores = LocalSessionStores()
    # The shared store's connection and this replica's link to the others, when configured.
    shared: SharedState | None = None
    # What a replica does with a session another replica ran last: None restores it from its
    # checkpoint; a sandbox provider that every replica reaches by name sets one that
    # reattaches (``codemode.replicas.registry.Handover``), before ``start()``.
    handover: Handover | None = None

    async def _follow(
        self,
        record: Session,
        job: asyncio.Task[ExecutionResult],
        progress: Progress | None = None,
    ) -> ExecutionResult:
        raise NotImplementedError  # the engine's

    async def _share_state(self) -> None:
        from codemode.replicas import share_state

        assert self.registry is not None
        shared = await anyio.to_thread.run_sync(
            share_state, self, self.registry, self._resuming, self.handover
        )
        self.shared, self.registry, self.approvals = shared, shared.registry, shared.approvals
        self.session_stores = shared.stores
        if self.audit and self.audit_log is None:
            self.audit_log, self._digest_key = shared.audit_log, shared.digest_key
        shared.link.start(asyncio.get_running_loop())

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
        assert self.registry is not None
        pending = self.approvals.answer(approval_id, allow, owner, digest=digest, remember=remember)
        record = self.registry.get(pending.session, owner)
        job = record.paused
        if job is None:
            raise SessionError("that execution is no longer running")
        return await self._follow(record, job, progress)

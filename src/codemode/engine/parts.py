"""The parts every session of an engine shares, built once when it starts: the composition root.

A factory builds them from what the engine hands it (``Wiring``). ``local_parts`` keeps them
in this process; ``codemode.replicas.attach.shared_parts`` keeps them in a store every replica
shares (``[gateway] shared_store``). The engine picks its factory when it is constructed
(``codemode.engine.factories``) and never replaces a part afterwards.

A new part (a store, say) is a field here, one line in each factory that builds it, and its
tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from codemode.config import CodemodeConfig
from codemode.engine.approvals import ApprovalBroker
from codemode.engine.registry import SessionFactory, SessionRegistry
from codemode.engine.session import Session
from codemode.engine.stores import LocalSessionStores, SessionStores
from codemode.privacy.ledger import ProbeLedgers

if TYPE_CHECKING:
    from codemode.audit import AuditLog
    from codemode.engine.handover import Handover, ResumeApproved, SharedStore

__all__ = ["PartsFactory", "SessionParts", "Wiring", "local_parts", "registry_for"]


@dataclass(frozen=True)
class Wiring:
    """What an engine gives the factory of its parts."""

    config: CodemodeConfig
    new_session: SessionFactory  # builds a session's sandbox and invoker chain
    on_close: Callable[[Session], None]  # heard when a session closes
    resuming: set[str]  # handles being resumed from their checkpoint right now
    resume: ResumeApproved  # runs an approval pending in this engine
    handover: Handover | None  # what a replica does with a session another one ran last
    audit: bool  # keep an audit log
    audit_log: AuditLog | None  # the caller's own (None: the factory opens one)
    loop: asyncio.AbstractEventLoop  # the engine's: where work for other replicas is run


@dataclass(frozen=True)
class SessionParts:
    """The session registry, the approval broker, where vaults and budgets live, the audit
    log (with the key of its argument digests), and the shared store's connection."""

    registry: SessionRegistry
    approvals: ApprovalBroker
    stores: SessionStores
    audit_log: AuditLog | None
    digest_key: bytes | None
    shared: SharedStore | None = None  # None: everything lives in this process
    # What oracle calls showed of hidden values, per owner, across sessions (this process).
    probe_ledgers: ProbeLedgers = field(default_factory=ProbeLedgers)

    def close(self) -> None:
        """Close the audit log and the shared store's connection (sessions are closed first)."""
        if self.audit_log is not None:
            self.audit_log.close()
        if self.shared is not None:
            self.shared.close()


class PartsFactory(Protocol):
    def __call__(self, wiring: Wiring) -> SessionParts:
        """Build the parts (blocking I/O allowed: the engine calls it in a thread)."""
        ...


def registry_for(wiring: Wiring) -> SessionRegistry:
    """This process's session registry, with the ``[gateway]`` limits."""
    gateway = wiring.config.gateway
    registry = SessionRegistry(
        wiring.new_session,
        idle_timeout_s=gateway.session_idle_timeout_s,
        max_sessions=gateway.max_sessions,
        max_per_client=gateway.max_sessions_per_client,
        max_stored=gateway.max_stored_sessions,
        evict_idle=gateway.idle_release_s > 0,
    )
    registry.on_close.append(wiring.on_close)
    return registry


def local_parts(wiring: Wiring) -> SessionParts:
    """Every part in this process: one gateway."""
    audit_log, digest_key = wiring.audit_log, None
    if audit_log is None and wiring.audit:
        from codemode.audit.batching import BatchedAuditLog
        from codemode.audit.opening import open_audit_log

        opened, digest_key = open_audit_log(wiring.config.gateway.state_dir, wiring.config.audit)
        audit_log = BatchedAuditLog(opened)
    return SessionParts(
        registry_for(wiring), ApprovalBroker(), LocalSessionStores(), audit_log, digest_key
    )

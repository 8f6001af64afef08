"""The chain of wrappers around a session's tool calls, declared in one place.

    built-in servers (state, skills: answered on the host, never upstream)
    -> audit -> policy (deny, ask, budgets, remembered approvals; it runs the privacy
    wrapper's flow check first, so a forbidden flow is refused before anything is asked and
    one the human must allow is part of the call's approval) -> observed result shapes (of
    the results the sandbox receives) -> oracle guard (probes of hidden values and their
    pieces; budgets for search and yes/no tools) -> privacy (tokens back to values, flow
    rules; results to tokens) -> upstream (the catalog)

Policy, approvals and the audit log see tokenized arguments: personal data never reaches them.
A new wrapper is one more line in ``build_invoker_chain``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from codemode.bridge.host import ApprovalGate, PackageProvider, ToolInvoker
from codemode.bridge.router import BuiltinRouter
from codemode.config import CodemodeConfig
from codemode.engine.stores import LocalSessionStores, SessionStores
from codemode.policy import Budget, Policy, PolicyInvoker
from codemode.policy.grants import Grants
from codemode.tools import ToolCall, ToolSpec

if TYPE_CHECKING:
    from codemode.audit import AuditInvoker, AuditLog
    from codemode.catalog.observed import ShapeBook
    from codemode.privacy.invoker import PrivacyInvoker
    from codemode.privacy.ledger import ProbeLedger

__all__ = ["InvokerChain", "build_invoker_chain"]

SpecLookup = Callable[[str, str], ToolSpec | None]


@dataclass(frozen=True)
class InvokerChain:
    """A session's outermost invoker, and the wrappers the session itself needs to reach."""

    invoker: ToolInvoker
    privacy: PrivacyInvoker | None
    budget: Budget
    audit: AuditInvoker | None = None
    # Installs packages for the code ([sandbox.packages]); None when that is off.
    packages: PackageProvider | None = None
    # Approvals remembered for a tool or a server, this session only.
    grants: Grants = field(default_factory=Grants)

    def on_refused(self, call: ToolCall, code: str, message: str) -> None:
        """For the bridge: a call refused before the chain saw it goes in the audit log."""
        if self.audit is not None:
            self.audit.record_refused(call, code, message)

    def sync(self) -> None:
        """An execution ends: its calls' audit events are stored before its result goes."""
        if self.audit is not None:
            self.audit.sync()

    def close(self) -> None:
        """The session ends: write what the audit wrapper still counts."""
        if self.audit is not None:
            self.audit.flush()


def build_invoker_chain(
    config: CodemodeConfig,
    upstream: ToolInvoker,
    *,
    session: str,
    specs: SpecLookup,
    approver: ApprovalGate | None,
    audit_log: AuditLog | None = None,
    digest_key: bytes | None = None,
    builtins: Mapping[str, ToolInvoker] | None = None,
    shapes: ShapeBook | None = None,
    stores: SessionStores | None = None,
    probes: ProbeLedger | None = None,
) -> InvokerChain:
    stores = stores or LocalSessionStores()
    invoker: ToolInvoker = upstream
    privacy: PrivacyInvoker | None = None
    if config.privacy.enabled:
        from codemode.privacy.invoker import PrivacyInvoker

        invoker = privacy = PrivacyInvoker(
            invoker, stores.vault(session), config.privacy, specs=specs
        )
        if config.privacy.oracle.enabled:
            from codemode.privacy.oracle import OracleGuard

            invoker = guard = OracleGuard(
                invoker,
                config.privacy.oracle,
                specs=specs,
                approver=approver,
                vault=privacy.vault,
                may_flow=privacy.flows_unasked,
                ledger=probes,  # the owner's: probes add up across the owner's sessions
            )
            if guard.knowledge is not None:
                privacy.on_idle(guard.knowledge.forget_index)
    if shapes is not None:  # outside privacy: it sees results as the sandbox will
        from codemode.catalog.observed import ShapeRecorder

        scrub = privacy.scan_output if privacy is not None else None
        invoker = ShapeRecorder(invoker, shapes, specs, scrub=scrub)
    budget = stores.budget(session, config.policy.budget)
    grants = Grants()
    invoker = PolicyInvoker(
        invoker,
        Policy(config.policy, specs),
        approver=approver,
        budget=budget,
        flows=privacy.check_flows if privacy is not None else None,
        grants=grants,
    )
    audit: AuditInvoker | None = None
    if audit_log is not None:
        from codemode.audit import AuditInvoker

        invoker = audit = AuditInvoker(
            invoker, audit_log, session, digest_key=digest_key, settings=config.audit
        )
    if builtins:
        invoker = BuiltinRouter(invoker, builtins)
    packages = None
    if config.sandbox.packages.enabled:
        from codemode.engine.packages import session_packages

        packages = session_packages(config.sandbox.packages, audit_log, session, digest_key)
    return InvokerChain(invoker, privacy, budget, audit, packages, grants)

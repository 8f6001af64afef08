"""``PolicyInvoker``: a ``ToolInvoker`` wrapper that enforces the policy and the budgets.

deny -> ``PolicyDeniedError``; a flow of hidden values the config forbids -> the flow gate's
error, before anything is asked; ask (the policy's, or a flow into a tool that may reach the
outside world) -> one approval that shows both (time spent waiting does not count against the
execution), ``ApprovalDeniedError`` when refused or when no approver exists; a used-up budget
-> ``BudgetExhaustedError``. An approval may be remembered for the tool or the server
(``codemode.policy.grants``); a call a grant covers runs without asking. Only an allowed or
approved call reaches the inner invoker, exactly once.
"""

from __future__ import annotations

import contextlib
from typing import Any

from codemode.bridge.host import ApprovalGate, ToolInvoker, execution_clock_paused
from codemode.errors import ToolError
from codemode.policy.budget import Budget, BudgetExceededError
from codemode.policy.engine import Decision, Policy
from codemode.policy.flowgate import FlowAsk, FlowGate, flows_approved
from codemode.policy.grants import ApprovalAnswer, CallKind, Grants, ScopedApprovalGate
from codemode.policy.outcome import (
    ApprovalDeniedError,
    BudgetExhaustedError,
    PolicyDeniedError,
    note_verdict,
)
from codemode.tools import ToolCall

__all__ = ["PolicyInvoker"]

FLOW_RULE = "privacy.flows"


class PolicyInvoker:
    def __init__(
        self,
        inner: ToolInvoker,
        policy: Policy,
        *,
        approver: ApprovalGate | None,
        budget: Budget,
        flows: FlowGate | None = None,
        grants: Grants | None = None,
    ) -> None:
        self.inner = inner
        self.policy = policy
        self.approver = approver
        self.budget = budget
        self.flows = flows
        self.grants = grants if grants is not None else Grants()

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        name = f"{call.server}.{call.tool}"
        decision = self.policy.decide(call)
        if decision.action == "deny":
            note_verdict("deny", decision.rule)
            raise PolicyDeniedError(
                f"{name} was not run: denied by policy: {decision.reason}. Do not retry; "
                "if the task needs this tool, ask the user to change the [policy] config",
                rule=decision.rule,
            )
        flow = self._check_flows(call)
        try:
            self.budget.acquire(name)
        except BudgetExceededError as exceeded:
            note_verdict("budget", decision.rule)
            raise BudgetExhaustedError(
                f"{name} was not run: budget exhausted ({exceeded.which}): {exceeded}; "
                f"to go on: {exceeded.fix}",
                which=exceeded.which,
            ) from None
        if decision.action == "ask" or flow is not None:
            self._approve(call, decision, flow)
        else:
            note_verdict("allow", decision.rule)
        tokens = flow.tokens if flow is not None else frozenset()
        with flows_approved(tokens) if tokens else contextlib.nullcontext():
            return self.inner.invoke(call, timeout_s=timeout_s)

    def _check_flows(self, call: ToolCall) -> FlowAsk | None:
        if self.flows is None:
            return None
        try:
            return self.flows(call)
        except ToolError:
            note_verdict("deny", FLOW_RULE)  # refused before any approval is asked
            raise

    def _approve(self, call: ToolCall, decision: Decision, flow: FlowAsk | None) -> None:
        """Return when the call may run (a grant covers it, or the human allowed it)."""
        name = f"{call.server}.{call.tool}"
        rule = decision.rule if decision.action == "ask" else FLOW_RULE
        kind: CallKind = (
            "read-only"
            if self.policy.is_read_only(name, self.policy.spec_for(call))
            else "destructive"
        )
        origins = flow.origins if flow is not None else frozenset()
        grant = self.grants.find(call, kind, origins)
        if grant is not None:
            note_verdict("allow", grant.label)
            return
        reasons = [decision.reason] if decision.action == "ask" else []
        if flow is not None:
            reasons.append(flow.reason)
        reason = "; ".join(reasons)
        # The approval showed the whole reason; a refusal names it in a few words.
        short = [decision.rule or "destructive by policy"] if decision.action == "ask" else []
        if flow is not None:
            short.append(f"hidden values from {', '.join(sorted(flow.origins))} going out")
        why = "; ".join(short)
        # Noted first so that an approver that raises leaves "ask-denied", not "allow".
        note_verdict("ask-denied", rule)
        if self.approver is None:
            self.budget.refund(name)
            raise ApprovalDeniedError(
                f"{name} was not run: it needs a human's approval ({why}), and "
                "this session has no way to ask one. Run it from a client that supports "
                'approvals, or ask the user to add a rule with action "allow" for it'
                + (" and the [privacy.flows] line for its values" if flow is not None else ""),
                rule=rule,
            )
        try:
            with execution_clock_paused():
                answer = self._ask(call, reason, flow)
        except BaseException:
            self.budget.refund(name)
            raise
        if not answer.allow:
            self.budget.refund(name)
            raise ApprovalDeniedError(
                f"{name} was not run: the user denied the approval it needs "
                f"({why}). Do not retry it unchanged; ask the user how to proceed",
                rule=rule,
            )
        granted = self.grants.remember(answer.remember, call, kind, origins)
        if granted is not None:
            rule = "; ".join(part for part in (rule, granted.label) if part)
        note_verdict("ask-approved", rule)

    def _ask(self, call: ToolCall, reason: str, flow: FlowAsk | None) -> ApprovalAnswer:
        approver = self.approver
        assert approver is not None
        if isinstance(approver, ScopedApprovalGate):
            return approver.ask(call, reason=reason, flows=flow)
        return ApprovalAnswer(approver.request(call, reason=reason))

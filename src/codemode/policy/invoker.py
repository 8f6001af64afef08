"""``PolicyInvoker``: a ``ToolInvoker`` wrapper that enforces the policy and the budgets.

deny -> ``PolicyDeniedError``; ask -> the ``Approver`` (time spent waiting does not count
against the execution), ``ApprovalDeniedError`` when refused or when no approver exists; a used-up
budget -> ``BudgetExhaustedError``. Only an allowed or approved call reaches the inner invoker,
exactly once.
"""

from __future__ import annotations

from typing import Any

from codemode.bridge.host import Approver, ToolInvoker, execution_clock_paused
from codemode.policy.budget import Budget, BudgetExceededError
from codemode.policy.engine import Policy
from codemode.policy.outcome import (
    ApprovalDeniedError,
    BudgetExhaustedError,
    PolicyDeniedError,
    note_verdict,
)
from codemode.tools import ToolCall

__all__ = ["PolicyInvoker"]


class PolicyInvoker:
    def __init__(
        self,
        inner: ToolInvoker,
        policy: Policy,
        *,
        approver: Approver | None,
        budget: Budget,
    ) -> None:
        self.inner = inner
        self.policy = policy
        self.approver = approver
        self.budget = budget

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
        try:
            self.budget.acquire(name)
        except BudgetExceededError as exceeded:
            note_verdict("budget", decision.rule)
            raise BudgetExhaustedError(
                f"{name} was not run: budget exhausted ({exceeded.which}): {exceeded}; "
                f"to go on: {exceeded.fix}",
                which=exceeded.which,
            ) from None
        if decision.action == "ask":
            # Noted first so that an approver that raises leaves "ask-denied", not "allow".
            note_verdict("ask-denied", decision.rule)
            if self.approver is None:
                self.budget.refund(name)
                raise ApprovalDeniedError(
                    f"{name} was not run: it needs a human's approval ({decision.reason}), and "
                    "this session has no way to ask one. Run it from a client that supports "
                    'approvals, or ask the user to add a rule with action "allow" for it',
                    rule=decision.rule,
                )
            try:
                with execution_clock_paused():
                    approved = self.approver.request(call, reason=decision.reason)
            except BaseException:
                self.budget.refund(name)
                raise
            if not approved:
                self.budget.refund(name)
                raise ApprovalDeniedError(
                    f"{name} was not run: the user denied the approval it needs "
                    f"({decision.reason}). Do not retry it unchanged; ask the user how to proceed",
                    rule=decision.rule,
                )
            note_verdict("ask-approved", decision.rule)
        else:
            note_verdict("allow", decision.rule)
        return self.inner.invoke(call, timeout_s=timeout_s)

"""Least privilege at the bridge: allow/deny/ask rules, read-only mode, approvals and budgets.

    PolicySettings.from_mapping(table, source)   the [policy] config table
    Policy(settings, specs_lookup).decide(call)  -> Decision(action, reason, rule)
    Budget(settings.budget)                      per-session counters (thread-safe)
    PolicyInvoker(inner, policy, approver=..., budget=...)   the ToolInvoker wrapper

Refusals raise ``PolicyRefusedError`` subclasses of ``ToolNotGrantedError``
(``PolicyDeniedError``, ``ApprovalDeniedError``, ``BudgetExhaustedError``); each carries the
``verdict`` that the audit log records.
"""

from codemode.policy.budget import Budget, BudgetExceededError
from codemode.policy.engine import Decision, Policy, SpecLookup, matches_any
from codemode.policy.invoker import PolicyInvoker
from codemode.policy.outcome import (
    ApprovalDeniedError,
    BudgetExhaustedError,
    PolicyDeniedError,
    PolicyRefusedError,
    Verdict,
    VerdictSlot,
    note_verdict,
    verdict_scope,
)
from codemode.settings.policy import Action, BudgetSettings, Mode, PolicySettings, Rule

__all__ = [
    "Action",
    "ApprovalDeniedError",
    "Budget",
    "BudgetExceededError",
    "BudgetExhaustedError",
    "BudgetSettings",
    "Decision",
    "Mode",
    "Policy",
    "PolicyDeniedError",
    "PolicyInvoker",
    "PolicyRefusedError",
    "PolicySettings",
    "Rule",
    "SpecLookup",
    "Verdict",
    "VerdictSlot",
    "matches_any",
    "note_verdict",
    "verdict_scope",
]

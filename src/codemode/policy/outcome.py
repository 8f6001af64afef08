"""What the policy wrapper decided for a call, for the wrappers around it (the audit log).

``PolicyInvoker`` notes its verdict in the innermost open ``verdict_scope()`` of the calling
thread; refusals also raise a ``PolicyRefusedError`` that carries it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from codemode.errors import ToolNotGrantedError

__all__ = [
    "ApprovalDeniedError",
    "BudgetExhaustedError",
    "PolicyDeniedError",
    "PolicyRefusedError",
    "Verdict",
    "VerdictSlot",
    "note_verdict",
    "verdict_scope",
]

Verdict = Literal["allow", "deny", "ask-approved", "ask-denied", "budget"]


@dataclass(slots=True)
class VerdictSlot:
    verdict: Verdict | None = None
    rule: str | None = None


_slot: contextvars.ContextVar[VerdictSlot | None] = contextvars.ContextVar(
    "codemode_policy_verdict", default=None
)


@contextlib.contextmanager
def verdict_scope() -> Iterator[VerdictSlot]:
    """Collect the verdict of the calls made inside this block (the last one wins)."""
    slot = VerdictSlot()
    token = _slot.set(slot)
    try:
        yield slot
    finally:
        _slot.reset(token)


def note_verdict(verdict: Verdict, rule: str | None = None) -> None:
    slot = _slot.get()
    if slot is not None:
        slot.verdict = verdict
        slot.rule = rule


class PolicyRefusedError(ToolNotGrantedError):
    """The policy refused a call; nothing was sent to the tool."""

    code = "policy_refused"
    verdict: Verdict = "deny"

    def __init__(self, message: str, *, rule: str | None = None) -> None:
        self.rule = rule
        super().__init__(message)


class PolicyDeniedError(PolicyRefusedError):
    """A deny rule, read-only mode, or the destructive default said no."""

    code = "policy_denied"
    verdict: Verdict = "deny"


class ApprovalDeniedError(PolicyRefusedError):
    """The call needed an approval and did not get one (refused, or no one to ask)."""

    code = "approval_denied"
    verdict: Verdict = "ask-denied"


class BudgetExhaustedError(PolicyRefusedError):
    """One of the session's budgets (calls, per tool, rate) is used up."""

    code = "budget_exhausted"
    verdict: Verdict = "budget"

    def __init__(self, message: str, *, which: str) -> None:
        self.which = which
        super().__init__(message)

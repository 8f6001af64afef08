"""PolicyInvoker: deny, ask (approved, refused, no approver), budgets; exactly one side effect."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from codemode.bridge.host import BridgeHost, ToolAccess
from codemode.errors import ToolError, ToolNotGrantedError
from codemode.policy import (
    ApprovalDeniedError,
    Budget,
    BudgetExhaustedError,
    BudgetSettings,
    Policy,
    PolicyDeniedError,
    PolicyInvoker,
    PolicySettings,
    verdict_scope,
)
from codemode.testing import RecordingInvoker
from codemode.tools import ToolCall, ToolSpec

SPECS = {("crm", "delete_contact"): ToolSpec("crm", "delete_contact", destructive=True)}


def FakeTools() -> RecordingInvoker:
    """The inner invoker: records every call that reached it (the side effects)."""
    return RecordingInvoker(default=lambda call: {"ok": call.tool})


class FakeApprover:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.requests: list[tuple[ToolCall, str]] = []

    def request(self, call: ToolCall, *, reason: str) -> bool:
        self.requests.append((call, reason))
        return self.answer


def make(
    approver: FakeApprover | None = None, budget: BudgetSettings | None = None, **table: Any
) -> tuple[PolicyInvoker, FakeTools]:
    tools = FakeTools()
    policy = Policy(PolicySettings.from_mapping(table, "test"), lambda s, t: SPECS.get((s, t)))
    return PolicyInvoker(tools, policy, approver=approver, budget=Budget(budget)), tools


SEND = ToolCall("mail", "send_email", {"to": "x"})
DELETE = ToolCall("crm", "delete_contact", {"id": 7})
ASK_MAIL: dict[str, Any] = {"rules": [{"tools": ["mail.*"], "action": "ask"}]}


def test_allowed_call_runs_once() -> None:
    invoker, tools = make()
    with verdict_scope() as slot:
        assert invoker.invoke(SEND, timeout_s=5) == {"ok": "send_email"}
    assert tools.calls == [SEND]
    assert tools.timeouts == [5]
    assert slot.verdict == "allow"


def test_denied_call_has_no_side_effect_and_says_how_to_change_it() -> None:
    invoker, tools = make(rules=[{"tools": ["mail.*"], "action": "deny", "reason": "no mail"}])
    with verdict_scope() as slot, pytest.raises(PolicyDeniedError) as caught:
        invoker.invoke(SEND, timeout_s=5)
    assert tools.calls == []
    error = caught.value
    assert isinstance(error, ToolNotGrantedError)
    assert isinstance(error, ToolError)
    assert error.code == "policy_denied"
    assert error.verdict == "deny"
    assert error.rule == "policy.rules[0]"
    assert "mail.send_email" in error.message
    assert "no mail" in error.message
    assert "[policy]" in error.message
    assert slot.verdict == "deny"
    assert slot.rule == "policy.rules[0]"


def test_approved_call_runs_exactly_once() -> None:
    approver = FakeApprover(True)
    invoker, tools = make(approver, **ASK_MAIL)
    with verdict_scope() as slot:
        invoker.invoke(SEND, timeout_s=5)
    assert tools.calls == [SEND]
    assert len(approver.requests) == 1
    call, reason = approver.requests[0]
    assert call == SEND
    assert "policy.rules[0]" in reason
    assert slot.verdict == "ask-approved"


def test_refused_approval_has_no_side_effect() -> None:
    approver = FakeApprover(False)
    invoker, tools = make(approver, **ASK_MAIL)
    with verdict_scope() as slot, pytest.raises(ApprovalDeniedError) as caught:
        invoker.invoke(SEND, timeout_s=5)
    assert tools.calls == []
    assert caught.value.code == "approval_denied"
    assert "denied the approval" in caught.value.message
    assert slot.verdict == "ask-denied"


def test_destructive_tools_ask_by_default() -> None:
    approver = FakeApprover(True)
    invoker, tools = make(approver)
    invoker.invoke(DELETE, timeout_s=5)
    invoker.invoke(SEND, timeout_s=5)
    assert [call for call, _ in approver.requests] == [DELETE]
    assert tools.calls == [DELETE, SEND]


def test_ask_without_approver_is_a_clear_denial() -> None:
    invoker, tools = make(None, **ASK_MAIL)
    with pytest.raises(ApprovalDeniedError) as caught:
        invoker.invoke(SEND, timeout_s=5)
    assert tools.calls == []
    assert "no way to ask" in caught.value.message
    assert '"allow"' in caught.value.message


def test_an_approver_that_fails_runs_nothing() -> None:
    class Broken:
        def request(self, call: ToolCall, *, reason: str) -> bool:
            raise RuntimeError("the client went away")

    tools = FakeTools()
    policy = Policy(PolicySettings.from_mapping(ASK_MAIL, "t"))
    budget = Budget(BudgetSettings(calls=1))
    invoker = PolicyInvoker(tools, policy, approver=Broken(), budget=budget)
    with verdict_scope() as slot, pytest.raises(RuntimeError):
        invoker.invoke(SEND, timeout_s=5)
    assert tools.calls == []
    assert slot.verdict == "ask-denied"
    assert budget.total == 0


def test_budget_exhausted_says_which_and_how_to_raise_it() -> None:
    invoker, tools = make(budget=BudgetSettings(per_tool={"mail.send_email": 2}))
    invoker.invoke(SEND, timeout_s=5)
    invoker.invoke(SEND, timeout_s=5)
    with verdict_scope() as slot, pytest.raises(BudgetExhaustedError) as caught:
        invoker.invoke(SEND, timeout_s=5)
    assert len(tools.calls) == 2
    error = caught.value
    assert error.code == "budget_exhausted"
    assert error.which == "per_tool"
    assert "budget exhausted" in error.message
    assert 'policy.budget.per_tool."mail.send_email"' in error.message
    assert slot.verdict == "budget"


def test_refused_approvals_do_not_use_the_budget() -> None:
    approver = FakeApprover(False)
    invoker, _ = make(approver, budget=BudgetSettings(calls=1), **ASK_MAIL)
    for _ in range(3):
        with pytest.raises(ApprovalDeniedError):
            invoker.invoke(SEND, timeout_s=5)
    assert invoker.budget.total == 0


def test_denied_calls_do_not_use_the_budget_and_budget_is_checked_before_asking() -> None:
    approver = FakeApprover(True)
    invoker, tools = make(
        approver,
        budget=BudgetSettings(calls=1),
        rules=[{"tools": ["crm.*"], "action": "deny"}, {"tools": ["mail.*"], "action": "ask"}],
    )
    with pytest.raises(PolicyDeniedError):
        invoker.invoke(DELETE, timeout_s=5)
    invoker.invoke(SEND, timeout_s=5)
    with pytest.raises(BudgetExhaustedError):
        invoker.invoke(SEND, timeout_s=5)
    assert len(approver.requests) == 1  # nobody is asked for a call the budget refuses
    assert tools.calls == [SEND]


def test_waiting_for_approval_pauses_the_execution_clock() -> None:
    """Through a real BridgeHost: the wait on the human extends the execution's deadline."""
    waited: list[float] = []
    release = threading.Event()

    class SlowHuman:
        def request(self, call: ToolCall, *, reason: str) -> bool:
            started = time.monotonic()
            assert release.wait(timeout=10)  # set by a timer thread: time passes, no sleep here
            waited.append(time.monotonic() - started)
            return True

    tools = FakeTools()
    policy = Policy(PolicySettings.from_mapping(ASK_MAIL, "t"))
    invoker = PolicyInvoker(tools, policy, approver=SlowHuman(), budget=Budget())
    host = BridgeHost(1, ToolAccess(invoker), deadline=time.monotonic() + 60)
    before = host.deadline
    timer = threading.Timer(0.05, release.set)
    timer.start()
    reply = host.handle(
        {"op": "call", "id": 1, "exec": 1, "server": "mail", "tool": "send_email", "args": {}}
    )
    timer.join(timeout=10)
    assert reply["ok"] is True
    assert tools.calls == [ToolCall("mail", "send_email", {})]
    assert host.deadline - before >= waited[0] > 0


def test_denial_through_the_bridge_reaches_the_code_with_its_message() -> None:
    invoker, _ = make(rules=[{"tools": ["mail.*"], "action": "deny"}])
    host = BridgeHost(1, ToolAccess(invoker), deadline=time.monotonic() + 60)
    reply = host.handle(
        {"op": "call", "id": 1, "exec": 1, "server": "mail", "tool": "send_email", "args": {}}
    )
    assert reply["ok"] is False
    assert reply["error"]["code"] == "policy_denied"
    assert "denied by policy" in reply["error"]["message"]

"""Remembered approvals in the PolicyInvoker: scopes (call, tool, server by kind), the values a
grant covers, refused flows before any approval, and what the audit verdict says."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from codemode.errors import ToolError
from codemode.policy import (
    ApprovalDeniedError,
    Budget,
    Policy,
    PolicyInvoker,
    PolicySettings,
    verdict_scope,
)
from codemode.policy.flowgate import FlowAsk, approved_tokens
from codemode.policy.grants import ApprovalAnswer, Grants, Remember
from codemode.testing import RecordingInvoker
from codemode.tools import ToolCall, ToolSpec

SPECS = {
    ("crm", "update_lead"): ToolSpec("crm", "update_lead", destructive=True),
    ("crm", "delete_lead"): ToolSpec("crm", "delete_lead", destructive=True),
    ("crm", "describe"): ToolSpec("crm", "describe"),  # no annotations: destructive
    ("mail", "send"): ToolSpec("mail", "send", destructive=False, open_world=True),
}


class ScopedFake:
    """An approver that answers with a scope and records what it was shown."""

    def __init__(self, remember: Remember = "call", allow: bool = True) -> None:
        self.answer = ApprovalAnswer(allow, remember)
        self.asked: list[tuple[ToolCall, str, FlowAsk | None]] = []

    def ask(self, call: ToolCall, *, reason: str, flows: FlowAsk | None) -> ApprovalAnswer:
        self.asked.append((call, reason, flows))
        return self.answer


class Gate:
    """A flow gate: values from ``origins`` in an argument named ``who`` need the human."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse

    def __call__(self, call: ToolCall) -> FlowAsk | None:
        origin = call.arguments.get("from")
        if origin is None:
            return None
        if self.refuse:
            raise ToolError('refused: add [privacy.flows] crm = ["crm", "mail"]')
        values: Mapping[str, tuple[str, ...]] = {origin: (call.arguments["who"],)}
        return FlowAsk(f"sends {call.arguments['who']} from {origin}", values)


class SeesApproved(RecordingInvoker):
    def __init__(self) -> None:
        super().__init__(default=lambda call: {"ok": call.tool})
        self.approved: list[frozenset[str]] = []

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        self.approved.append(approved_tokens())
        return super().invoke(call, timeout_s=timeout_s)


def make(
    approver: ScopedFake, gate: Gate | None = None, grants: Grants | None = None, **table: Any
) -> tuple[PolicyInvoker, SeesApproved]:
    tools = SeesApproved()
    policy = Policy(PolicySettings.from_mapping(table, "test"), lambda s, t: SPECS.get((s, t)))
    invoker = PolicyInvoker(
        tools, policy, approver=approver, budget=Budget(), flows=gate, grants=grants
    )
    return invoker, tools


def update(stage: str) -> ToolCall:
    return ToolCall("crm", "update_lead", {"id": 1, "stage": stage})


def test_remember_call_asks_every_time() -> None:
    approver = ScopedFake("call")
    invoker, tools = make(approver)
    for stage in "abcde":
        invoker.invoke(update(stage), timeout_s=5)
    assert len(approver.asked) == 5
    assert len(tools.calls) == 5


def test_remember_tool_asks_once_for_five_calls_and_is_audited() -> None:
    approver = ScopedFake("tool")
    grants = Grants()
    invoker, tools = make(approver, grants=grants)
    verdicts = []
    for stage in "abcde":
        with verdict_scope() as slot:
            invoker.invoke(update(stage), timeout_s=5)
        verdicts.append((slot.verdict, slot.rule))
    assert len(approver.asked) == 1
    assert len(tools.calls) == 5
    assert verdicts[0] == ("ask-approved", "remembered approval (tool: crm.update_lead)")
    assert verdicts[1:] == [("allow", "remembered approval (tool: crm.update_lead)")] * 4
    assert [(g["scope"], g["target"]) for g in grants.snapshot()] == [("tool", "crm.update_lead")]
    # Another tool of the server still asks.
    invoker.invoke(ToolCall("crm", "delete_lead", {"id": 1}), timeout_s=5)
    assert len(approver.asked) == 2


def test_remember_server_covers_calls_of_the_same_kind_only() -> None:
    approver = ScopedFake("server")
    invoker, _tools = make(approver, read_only_tools=["crm.describe"])
    invoker.invoke(update("a"), timeout_s=5)
    invoker.invoke(ToolCall("crm", "delete_lead", {"id": 1}), timeout_s=5)  # destructive too
    assert len(approver.asked) == 1
    # A read-only call of the server is another kind: asked separately (here by a rule).
    second = ScopedFake("server")
    asking, _ = make(
        second, rules=[{"tools": ["crm.*"], "action": "ask"}], read_only_tools=["crm.describe"]
    )
    asking.invoke(update("a"), timeout_s=5)
    asking.invoke(ToolCall("crm", "describe", {}), timeout_s=5)
    asking.invoke(ToolCall("crm", "describe", {}), timeout_s=5)
    assert len(second.asked) == 2


def test_a_denied_approval_remembers_nothing() -> None:
    approver = ScopedFake("tool", allow=False)
    grants = Grants()
    invoker, tools = make(approver, grants=grants)
    with pytest.raises(ApprovalDeniedError):
        invoker.invoke(update("a"), timeout_s=5)
    assert len(grants) == 0 and tools.calls == []


def test_grants_are_per_invoker_so_per_session() -> None:
    first, _ = make(ScopedFake("tool"))
    first.invoke(update("a"), timeout_s=5)
    second_approver = ScopedFake("tool")
    second, _ = make(second_approver)
    second.invoke(update("a"), timeout_s=5)
    assert len(second_approver.asked) == 1


def test_a_flow_ask_is_part_of_the_one_approval_and_lets_exactly_those_values_through() -> None:
    approver = ScopedFake("call")
    invoker, tools = make(approver, gate=Gate())
    call = ToolCall("mail", "send", {"who": "<EMAIL_1>", "from": "crm"})
    invoker.invoke(call, timeout_s=5)
    [(asked, reason, flows)] = approver.asked
    assert asked == call and "sends <EMAIL_1> from crm" in reason
    assert flows is not None and dict(flows.values) == {"crm": ("<EMAIL_1>",)}
    assert tools.approved == [frozenset({"<EMAIL_1>"})]
    assert approved_tokens() == frozenset()  # only inside the call


def test_a_tool_grant_covers_values_from_the_servers_it_saw_and_no_others() -> None:
    approver = ScopedFake("tool")
    invoker, _ = make(approver, gate=Gate())
    invoker.invoke(ToolCall("mail", "send", {"who": "<EMAIL_1>", "from": "crm"}), timeout_s=5)
    invoker.invoke(ToolCall("mail", "send", {"who": "<EMAIL_2>", "from": "crm"}), timeout_s=5)
    assert len(approver.asked) == 1
    invoker.invoke(ToolCall("mail", "send", {"who": "<PHONE_1>", "from": "hr"}), timeout_s=5)
    assert len(approver.asked) == 2


def test_a_refused_flow_is_refused_before_any_approval() -> None:
    approver = ScopedFake("call")
    invoker, tools = make(approver, gate=Gate(refuse=True))
    call = ToolCall("crm", "update_lead", {"who": "<EMAIL_1>", "from": "mail"})
    with verdict_scope() as slot, pytest.raises(ToolError, match=r"\[privacy.flows\] crm"):
        invoker.invoke(call, timeout_s=5)
    assert approver.asked == [] and tools.calls == []
    assert (slot.verdict, slot.rule) == ("deny", "privacy.flows")
    assert invoker.budget.total == 0


def test_plain_approvers_still_answer_one_call() -> None:
    class Plain:
        def __init__(self) -> None:
            self.count = 0

        def request(self, call: ToolCall, *, reason: str) -> bool:
            self.count += 1
            return True

    plain = Plain()
    tools = SeesApproved()
    policy = Policy(PolicySettings(), lambda s, t: SPECS.get((s, t)))
    invoker = PolicyInvoker(tools, policy, approver=plain, budget=Budget())
    invoker.invoke(update("a"), timeout_s=5)
    invoker.invoke(update("b"), timeout_s=5)
    assert plain.count == 2


def test_approval_and_refusal_messages_stay_short_in_the_worst_case() -> None:
    from codemode.privacy import PrivacySettings
    from codemode.privacy.flows import decide_flows
    from codemode.privacy.vault import VaultEntry
    from codemode.tokens import count_tokens

    # An unannotated tool (asks by policy) that would get 29 addresses and a phone number from
    # two servers (asks by flow): one approval, both reasons.
    entries = [
        VaultEntry(f"<EMAIL_{i}>", "EMAIL", "x", frozenset({"sqlite"})) for i in range(1, 30)
    ]
    entries.append(VaultEntry("<PHONE_1>", "PHONE", "x", frozenset({"crm-prod"})))
    flows = decide_flows(PrivacySettings(), entries, "filesystem", "write_file", closed_world=False)
    assert isinstance(flows, FlowAsk)
    approver = ScopedFake("call", allow=False)
    spec = ToolSpec("filesystem", "write_file")
    policy = Policy(PolicySettings(), lambda s, t: spec)
    invoker = PolicyInvoker(
        SeesApproved(), policy, approver=approver, budget=Budget(), flows=lambda call: flows
    )
    with pytest.raises(ApprovalDeniedError) as denied:
        invoker.invoke(ToolCall("filesystem", "write_file", {}), timeout_s=5)
    [(_call, reason, _flows)] = approver.asked
    assert "\n" not in reason and count_tokens(reason) < 120
    assert '[privacy.flows] sqlite = ["sqlite", "filesystem"]' in reason
    assert count_tokens(str(denied.value)) < 120
    assert "ask the user how to proceed" in str(denied.value)
    nobody = PolicyInvoker(
        SeesApproved(), policy, approver=None, budget=Budget(), flows=lambda c: flows
    )
    with pytest.raises(ApprovalDeniedError) as unasked:
        nobody.invoke(ToolCall("filesystem", "write_file", {}), timeout_s=5)
    assert count_tokens(str(unasked.value)) < 120

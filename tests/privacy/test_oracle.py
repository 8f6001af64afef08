"""A substring oracle cannot rebuild a hidden value: a probe that grows a piece of it is paused
for a human (and stopped when no one approves) before a tenth of it shows, whatever shape the
guesses take; search/yes-no tools keep a rate and a total per session as a backstop."""

from __future__ import annotations

import string
from typing import Any

import pytest

from codemode.config import CodemodeConfig
from codemode.engine.chain import build_invoker_chain
from codemode.policy.outcome import ApprovalDeniedError, BudgetExhaustedError, PolicyRefusedError
from codemode.privacy import PrivacySettings
from codemode.privacy.oracle import OracleGuard, OracleSettings
from codemode.privacy.recall import skeleton
from codemode.tools import ToolCall, ToolSpec

SECRET_EMAIL = "maria.lopez@globex.example.com"
ALPHABET = string.ascii_lowercase + string.digits + "._@-"


class Crm:
    """``get_contact`` returns the address (tokenized for the code); ``search`` says whether
    any address starts with a string: the oracle."""

    def __init__(self) -> None:
        self.searches = 0
        self.confirmed = 0  # the longest guess answered yes: what the code has learned

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        if call.tool == "get_contact":
            return {"email": SECRET_EMAIL}
        if call.tool == "search":
            self.searches += 1
            found = SECRET_EMAIL.startswith(call.arguments["query"])
            if found:
                self.confirmed = max(self.confirmed, len(skeleton(call.arguments["query"])))
            return {"found": found}
        if call.tool == "count_orders":
            return {"count": 3}
        raise KeyError(call.tool)


class Approver:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def request(self, call: ToolCall, *, reason: str) -> bool:
        self.asked.append(reason)
        return self.answer


def chain(crm: Crm, approver: Approver | None, **oracle: Any) -> Any:
    privacy = PrivacySettings(oracle=OracleSettings(**oracle))
    config = CodemodeConfig(servers={}, privacy=privacy)
    return build_invoker_chain(
        config, crm, session="s1", specs=lambda s, t: None, approver=approver
    ).invoker


def rebuild(invoker: Any) -> str:
    """Hostile code: extend a known prefix one character at a time (what took 413 calls)."""
    token = invoker.invoke(ToolCall("crm", "get_contact", {}), timeout_s=5)["email"]
    assert token.startswith("<EMAIL_")
    known = ""
    while True:
        for char in ALPHABET:
            reply = invoker.invoke(ToolCall("crm", "search", {"query": known + char}), timeout_s=5)
            if reply["found"]:
                known += char
                break
        else:
            return known


def test_the_attack_works_without_the_guard() -> None:
    """The baseline the guard must beat: with it off, the address comes back whole."""
    crm = Crm()
    assert rebuild(chain(crm, None, enabled=False)) == SECRET_EMAIL
    assert crm.searches > 100


@pytest.mark.parametrize("approver", [None, Approver(False)])
def test_a_substring_oracle_is_stopped_before_it_rebuilds_a_value(
    approver: Approver | None,
) -> None:
    crm = Crm()
    with pytest.raises(ApprovalDeniedError, match="Pass <EMAIL_1> itself"):
        rebuild(chain(crm, approver))
    assert crm.confirmed < 0.1 * len(skeleton(SECRET_EMAIL))
    if approver is not None:
        assert len(approver.asked) == 1 and "crm.search" in approver.asked[0]


def test_an_approved_pattern_goes_on_and_asks_again_later() -> None:
    crm, approver = Crm(), Approver(True)
    invoker = chain(crm, approver, calls_per_session=80, calls_per_minute=1000)
    with pytest.raises(BudgetExhaustedError, match="calls_per_session"):
        rebuild(invoker)
    assert len(approver.asked) >= 2  # asked at each step that grows the piece
    assert crm.searches == 80  # and the session total still holds


def test_the_rate_per_minute_holds_and_recovers() -> None:
    now = [0.0]
    crm = Crm()
    guard = OracleGuard(
        crm,
        OracleSettings(calls_per_minute=3),
        specs=lambda s, t: None,
        approver=None,
        clock=lambda: now[0],
    )
    for query in ("alpha", "bravo", "charlie"):
        guard.invoke(ToolCall("crm", "search", {"query": query}), timeout_s=5)
    with pytest.raises(BudgetExhaustedError, match="3 per minute"):
        guard.invoke(ToolCall("crm", "search", {"query": "delta"}), timeout_s=5)
    now[0] = 61.0
    guard.invoke(ToolCall("crm", "search", {"query": "delta"}), timeout_s=5)
    assert crm.searches == 4


def test_other_tools_are_not_budgeted() -> None:
    crm = Crm()
    invoker = chain(crm, None, calls_per_session=1)
    for _ in range(5):
        assert invoker.invoke(ToolCall("crm", "count_orders", {}), timeout_s=5) == {"count": 3}


def test_tools_are_oracles_by_name_schema_or_boolean_output() -> None:
    specs = {
        "exists": ToolSpec("crm", "exists_contact"),
        "lookup": ToolSpec("crm", "people", input_schema={"properties": {"Query": {}}}),
        "flag": ToolSpec("crm", "flagged", output_schema={"type": "boolean"}),
        "plain": ToolSpec("crm", "orders", input_schema={"properties": {"limit": {}}}),
    }
    by_name = {spec.name: spec for spec in specs.values()}
    guard = OracleGuard(Crm(), OracleSettings(), specs=lambda s, t: by_name.get(t), approver=None)
    assert guard.is_oracle("crm", "exists_contact")
    assert guard.is_oracle("crm", "people")
    assert guard.is_oracle("crm", "flagged")
    assert not guard.is_oracle("crm", "orders")


def test_refusals_are_policy_refusals_for_the_audit_log() -> None:
    assert issubclass(BudgetExhaustedError, PolicyRefusedError)
    assert issubclass(ApprovalDeniedError, PolicyRefusedError)


def test_noise_in_other_arguments_does_not_hide_a_probe() -> None:
    """Hostile code pads each call with a changing argument and grows its guess two
    characters at a time: the guess is still compared with the guesses before it."""
    crm, approver = Crm(), Approver(False)
    invoker = chain(crm, approver)
    invoker.invoke(ToolCall("crm", "get_contact", {}), timeout_s=5)
    with pytest.raises(ApprovalDeniedError):
        for index in range(100):
            guess = "maria.lopez@globex.example.com"[: 2 + 2 * (index % 14)]
            arguments = {"query": guess, "pad": f"{index:08x}{index * 7919:08x}"}
            invoker.invoke(ToolCall("crm", "search", arguments), timeout_s=5)
    assert crm.confirmed < 0.1 * len(skeleton(SECRET_EMAIL))
    assert approver.asked


def test_arguments_are_read_for_pieces_only_for_oracles_and_flows_that_could_be_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pieces count toward probes (oracle tools) and toward flows the rules do not let go
    unasked; a call to a tool that is neither has nothing to count them for."""
    from codemode.privacy.pieces import Knowledge

    read: list[str] = []
    pieces = Knowledge.pieces

    def counted(self: Knowledge, arguments: Any) -> Any:
        read.append(f"{arguments}")
        return pieces(self, arguments)

    monkeypatch.setattr(Knowledge, "pieces", counted)
    crm = Crm()
    invoker = chain(crm, Approver(True))
    invoker.invoke(ToolCall("crm", "get_contact", {}), timeout_s=5)
    read.clear()
    # crm's data may go back to crm: a tool that is no oracle is not read for pieces.
    invoker.invoke(ToolCall("crm", "count_orders", {"customer": "maria.lopez"}), timeout_s=5)
    assert read == []
    invoker.invoke(ToolCall("crm", "search", {"query": "maria"}), timeout_s=5)
    assert read == ["{'query': 'maria'}"]  # an oracle: its pieces count toward probes
    # Another server (open world, no annotations): crm's data may go there only if asked.
    invoker.invoke(ToolCall("mail", "count_orders", {"to": "maria.lopez"}), timeout_s=5)
    assert read[1:] == ["{'to': 'maria.lopez'}"]

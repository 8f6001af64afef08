"""The flow decision (codemode.privacy.flows): closed-world destinations by default, open-world
ones asked, config applied as written, and the config line that allows a flow."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.policy.flowgate import flows_approved
from codemode.privacy import DataFlowDeniedError, PrivacyInvoker, PrivacySettings, Vault
from codemode.privacy.flows import allowing_line, flow_action
from codemode.privacy.vault import TokenSource
from codemode.testing import RecordingInvoker
from codemode.tokens import count_tokens
from codemode.tools import ToolCall, ToolSpec

EMAIL = "maria.lopez@globex.example.com"
CRM = TokenSource("crm", "get", "result")
SPECS = {
    ("book", "add_contact"): ToolSpec("book", "add_contact", destructive=False, open_world=False),
    ("web", "post"): ToolSpec("web", "post", destructive=False, open_world=True),
    ("fs", "write"): ToolSpec("fs", "write"),  # no annotations
}


def settings(flows: dict[str, Any] | None = None) -> PrivacySettings:
    return PrivacySettings.from_mapping({"flows": flows or {}}, "test")


@pytest.mark.parametrize(
    ("flows", "destination", "closed", "expected"),
    [
        ({}, "book", True, "allow"),  # closed world, no config: allowed
        ({}, "web", False, "ask"),  # may reach the outside world: the human decides
        ({}, "crm", False, "allow"),  # back to its source
        ({"crm": ["web"]}, "web", False, "allow"),  # the owner's line, applied as written
        ({"crm": []}, "book", True, "deny"),  # an explicit list forbids the rest
        ({"*": []}, "book", True, "deny"),
        ({"*": ["book"]}, "book", True, "allow"),
    ],
)
def test_flow_action(flows: dict[str, Any], destination: str, closed: bool, expected: str) -> None:
    assert flow_action(settings(flows), "crm", destination, closed_world=closed) == expected


def test_allowing_line_keeps_what_is_listed() -> None:
    assert allowing_line(settings(), "sqlite", "filesystem") == (
        '[privacy.flows] sqlite = ["sqlite", "filesystem"]'
    )
    assert allowing_line(settings({"crm": ["mail"]}), "crm", "web") == (
        '[privacy.flows] crm = ["crm", "mail", "web"]'
    )
    assert allowing_line(settings(), "my.server", "web") == (
        '[privacy.flows] "my.server" = ["my.server", "web"]'
    )


def make(flows: dict[str, Any] | None = None) -> tuple[PrivacyInvoker, RecordingInvoker]:
    upstream = RecordingInvoker(
        default=lambda call: {"email": EMAIL} if call.server == "crm" else {"ok": True}
    )
    invoker = PrivacyInvoker(
        upstream, Vault(), settings(flows), specs=lambda s, t: SPECS.get((s, t))
    )
    return invoker, upstream


def test_closed_world_tools_get_the_values_with_no_config() -> None:
    invoker, upstream = make()
    token = invoker.invoke(ToolCall("crm", "get", {}), timeout_s=5)["email"]
    assert invoker.check_flows(ToolCall("book", "add_contact", {"email": token})) is None
    invoker.invoke(ToolCall("book", "add_contact", {"email": token}), timeout_s=5)
    assert upstream.calls[-1].arguments == {"email": EMAIL}


@pytest.mark.parametrize("tool", [("web", "post"), ("fs", "write")])
def test_open_world_tools_need_the_humans_approval_of_those_values(tool: tuple[str, str]) -> None:
    invoker, upstream = make()
    token = invoker.invoke(ToolCall("crm", "get", {}), timeout_s=5)["email"]
    call = ToolCall(*tool, {"body": f"write to {token}"})
    asked = invoker.check_flows(call)
    assert asked is not None and dict(asked.values) == {"crm": (token,)}
    assert f'[privacy.flows] crm = ["crm", "{tool[0]}"]' in asked.reason
    assert count_tokens(asked.reason) < 120
    with pytest.raises(DataFlowDeniedError, match="only with the user's approval"):
        invoker.invoke(call, timeout_s=5)  # nothing approved
    with flows_approved(frozenset({"<EMAIL_99>"})), pytest.raises(DataFlowDeniedError):
        invoker.invoke(call, timeout_s=5)  # another value approved, not this one
    assert len(upstream.calls) == 1
    with flows_approved(asked.tokens):
        invoker.invoke(call, timeout_s=5)
    assert upstream.calls[-1].arguments == {"body": f"write to {EMAIL}"}


def test_a_value_passed_in_clear_counts_as_its_token() -> None:
    invoker, _ = make()
    token = invoker.invoke(ToolCall("crm", "get", {}), timeout_s=5)["email"]
    asked = invoker.check_flows(ToolCall("web", "post", {"body": EMAIL.upper()}))
    assert asked is not None and asked.tokens == {token}


def test_a_forbidden_flow_names_the_line_that_allows_it() -> None:
    invoker, upstream = make({"crm": ["mail"]})
    token = invoker.invoke(ToolCall("crm", "get", {}), timeout_s=5)["email"]
    with pytest.raises(DataFlowDeniedError) as caught:
        invoker.check_flows(ToolCall("book", "add_contact", {"email": token}))
    message = caught.value.message
    assert '[privacy.flows] crm = ["crm", "mail", "book"]' in message
    assert EMAIL not in str(caught.value)
    assert count_tokens(str(caught.value)) < 120
    assert len(upstream.calls) == 1


def counting_readings(invoker: PrivacyInvoker, monkeypatch: pytest.MonkeyPatch) -> list[ToolCall]:
    read = invoker._detokenized
    calls: list[ToolCall] = []

    def counted(call: ToolCall) -> Any:
        calls.append(call)
        return read(call)

    monkeypatch.setattr(invoker, "_detokenized", counted)
    return calls


def test_the_call_checked_is_not_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    invoker, upstream = make()
    token = invoker.invoke(ToolCall("crm", "get", {}), timeout_s=5)["email"]
    readings = counting_readings(invoker, monkeypatch)
    call = ToolCall("book", "add_contact", {"email": token, "note": "x" * 100_000})
    assert invoker.check_flows(call) is None
    invoker.invoke(call, timeout_s=5)
    assert readings == [call]
    assert upstream.calls[-1].arguments["email"] == EMAIL
    other = ToolCall("book", "add_contact", {"email": token})
    invoker.check_flows(call)
    invoker.invoke(other, timeout_s=5)  # not the call checked: read for itself
    assert readings == [call, call, other]


def test_a_value_the_vault_learns_after_the_check_is_still_found() -> None:
    invoker, upstream = make()
    invoker.vault.token_for("EMAIL", "kofi.okafor@initech.example.com", CRM)
    call = ToolCall("web", "post", {"body": f"write to {EMAIL}"})
    assert invoker.check_flows(call) is None  # the vault does not hold EMAIL yet
    invoker.vault.token_for("EMAIL", EMAIL, CRM)  # now it does (another call's result)
    with pytest.raises(DataFlowDeniedError, match="only with the user's approval"):
        invoker.invoke(call, timeout_s=5)
    assert upstream.calls == []


def counting_plain_reads(
    invoker: PrivacyInvoker, monkeypatch: pytest.MonkeyPatch
) -> list[ToolCall]:
    """The calls whose arguments were read for values in clear."""
    reads: list[ToolCall] = []
    plain = invoker._plain_values

    def counted(arguments: Any, *rest: Any) -> Any:
        reads.append(arguments)
        return plain(arguments, *rest)

    monkeypatch.setattr(invoker, "_plain_values", counted)
    return reads


def test_arguments_are_read_for_values_in_clear_only_where_a_flow_could_be_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    invoker, upstream = make()
    token = invoker.invoke(ToolCall("crm", "get", {}), timeout_s=5)["email"]
    reads = counting_plain_reads(invoker, monkeypatch)
    # crm's data may go back to crm and to closed-world tools: nothing to ask, nothing read.
    for call in (
        ToolCall("crm", "update", {"note": f"mail {EMAIL} or {token}"}),
        ToolCall("book", "add_contact", {"email": EMAIL}),
    ):
        assert invoker.check_flows(call) is None
        invoker.invoke(call, timeout_s=5)
    assert reads == []
    assert upstream.calls[-2].arguments == {"note": f"mail {EMAIL} or {EMAIL}"}
    # An open-world tool: the value in clear is found and asked for, as its token would be.
    asked = invoker.check_flows(ToolCall("web", "post", {"body": EMAIL}))
    assert asked is not None and asked.tokens == {token} and len(reads) == 1


def test_a_new_origin_after_the_check_makes_the_call_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Checked while every origin could go there unasked; a value from a server that may not
    arrives before the call is sent (a parallel call's result): the call is read again."""
    invoker, upstream = make()
    invoker.invoke(ToolCall("crm", "get", {}), timeout_s=5)
    reads = counting_plain_reads(invoker, monkeypatch)
    secret = "grace.hopper@navy.example.com"
    call = ToolCall("crm", "update", {"note": f"cc {secret}"})
    assert invoker.check_flows(call) is None and reads == []
    version = invoker.vault.version
    invoker.vault.token_for("EMAIL", secret, TokenSource("mail", "inbox", "from"))
    assert invoker.vault.version > version
    with pytest.raises(DataFlowDeniedError, match="only with the user's approval"):
        invoker.invoke(call, timeout_s=5)
    assert len(reads) == 1 and len(upstream.calls) == 1


def test_the_vault_knows_every_origin_and_a_new_one_changes_its_version() -> None:
    vault = Vault()
    assert vault.origins() == frozenset()
    token = vault.token_for("EMAIL", EMAIL, CRM)
    first = vault.version
    vault.tokens_for([("EMAIL", EMAIL), ("PHONE", "+1 415 555 0100")], CRM)
    assert vault.origins() == {"crm"}
    assert vault.version == first + 1  # one new entry; crm was an origin already
    vault.mark_delivered(token, "mail")
    vault.token_for("EMAIL", EMAIL, TokenSource("mail", "read", "body"))
    assert vault.origins() == {"crm"}  # mail only returned what it was sent
    before = vault.version
    vault.tokens_for([("EMAIL", EMAIL)], TokenSource("web", "fetch", "text"))
    assert vault.origins() == {"crm", "web"} and vault.version == before + 1
    vault.wipe()
    assert vault.origins() == frozenset()

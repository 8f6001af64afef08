"""Each way personal data reached the model, closed: markup in search snippets, fragments in
truncated errors, transformed ids, plain values rebuilt by the code, and fields of the result
that were never scanned."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from codemode.engine.chain import InvokerChain
from codemode.engine.session import Session
from codemode.errors import ToolError
from codemode.policy import Budget
from codemode.privacy import (
    DataFlowDeniedError,
    PrivacyInvoker,
    PrivacySettings,
    Vault,
    assert_no_pii,
)
from codemode.privacy.recall import skeleton
from codemode.sandbox.reports import Restore
from codemode.sandbox.result import ExecutionResult
from codemode.settings.policy import BudgetSettings
from codemode.tools import ToolCall

EMAIL = "maria.lopez@globex.example.com"
PHONE = "+44 20 7946 0958"

SNIPPETS = [
    "contact maria.lopez@[globex].example.com for renewals",
    "call +44 20 [7946] 0958 after 5pm",
    "<em>maria</em>.lopez@globex.example.com wrote",
    "**+44** 20 7946 0958 (office)",
    "...maria.lopez@globex.example.com...",
    "…lopez@glo<b>bex</b>.example.com…",
    "mail maria.lopez @ globex.example.com today",
    "phone +44 20\n7946 0958",
    "phone +44 20  7946\t0958",
]


class Upstream:
    """A search tool, a tool that echoes a truncated address in its error, an id maker."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        self.calls.append(call)
        if call.tool == "search":
            return {"hits": [{"snippet": text} for text in SNIPPETS]}
        if call.tool == "contact":
            return {"email": EMAIL, "phone": PHONE}
        if call.tool == "validate":
            raise ToolError(f"invalid address {EMAIL[:15]!r} (truncated)")
        if call.tool == "validate_tail":
            raise ToolError(f"field too long: ...{EMAIL[7:]}")
        if call.tool == "document":
            return {"id": "doc-maria-lopez-globex-example-com", "title": "Contract"}
        return {"ok": True}


def make(table: dict[str, Any] | None = None) -> tuple[PrivacyInvoker, Upstream]:
    upstream = Upstream()
    settings = PrivacySettings.from_mapping(table or {}, "test.toml")
    return PrivacyInvoker(upstream, Vault(), settings), upstream


def call(invoker: PrivacyInvoker, server: str, tool: str, **arguments: Any) -> Any:
    return invoker.invoke(ToolCall(server, tool, arguments), timeout_s=5)


def reveals(text: str, value: str, fraction: float = 0.4) -> bool:
    """Whether ``text`` holds a run of ``value``'s letters and digits of that fraction."""
    value_skeleton, text_skeleton = skeleton(value), skeleton(text)
    size = max(6, int(len(value_skeleton) * fraction))
    return any(
        value_skeleton[i : i + size] in text_skeleton for i in range(len(value_skeleton) - size + 1)
    )


@pytest.mark.parametrize("snippet", SNIPPETS)
def test_search_snippets_with_markup_are_tokenized(snippet: str) -> None:
    invoker, _ = make()
    hit = invoker._tokenizer.tokenize(snippet, invoker.vault, server="docs", tool="search")
    assert_no_pii(hit)
    assert not reveals(hit, EMAIL) and not reveals(hit, PHONE), hit
    assert "<EMAIL_1>" in hit or "<PHONE_1>" in hit


def test_a_value_split_by_markup_gets_the_token_of_the_clean_value() -> None:
    invoker, _ = make()
    contact = call(invoker, "crm", "contact")
    hits = call(invoker, "docs", "search")["hits"]
    assert hits[0]["snippet"] == f"contact {contact['email']} for renewals"
    assert hits[1]["snippet"] == f"call {contact['phone']} after 5pm"


def test_output_scan_catches_snippets_the_code_prints() -> None:
    invoker, _ = make({"enabled": True})
    printed = invoker.scan_output("\n".join(SNIPPETS))
    assert_no_pii(printed)
    assert not reveals(printed, EMAIL) and not reveals(printed, PHONE), printed


@pytest.mark.parametrize("tool", ["validate", "validate_tail"])
def test_truncated_upstream_errors_do_not_show_half_an_address(tool: str) -> None:
    invoker, _ = make()
    call(invoker, "crm", "contact")  # the address is in the vault now
    with pytest.raises(ToolError) as raised:
        call(invoker, "crm", tool, email="<EMAIL_1>")
    assert not reveals(raised.value.message, EMAIL, 0.3), raised.value.message
    assert "<EMAIL_1>" in raised.value.message


def test_a_printed_fragment_of_a_known_value_is_hidden() -> None:
    invoker, _ = make()
    call(invoker, "crm", "contact")
    for printed in ("user maria.lopez@glo", "MARIA_LOPEZ", "tel 2079460958", "id 7946-0958-x"):
        shown = invoker.scan_output(printed)
        assert not reveals(shown, EMAIL, 0.35) and not reveals(shown, PHONE, 0.6), shown


def test_an_id_derived_from_an_address_is_tokenized() -> None:
    invoker, _ = make()
    call(invoker, "crm", "contact")
    document = call(invoker, "docs", "document")
    assert document["id"] != "doc-maria-lopez-globex-example-com"
    assert not reveals(document["id"], EMAIL), document
    assert document["title"] == "Contract"


def test_a_shared_domain_alone_is_not_a_fragment() -> None:
    invoker, _ = make()
    call(invoker, "crm", "contact")
    assert invoker.scan_output("see https://globex.example.com/about") == (
        "see https://globex.example.com/about"
    )


def test_flow_rules_stop_a_value_rebuilt_in_plain_text() -> None:
    invoker, upstream = make()  # crm data may go back to crm only
    call(invoker, "crm", "contact")
    for rebuilt in (EMAIL, EMAIL.upper(), f"To: {EMAIL}", "maria lopez at globex example com"):
        with pytest.raises(DataFlowDeniedError, match="<EMAIL_1>"):
            call(invoker, "mail", "send", to=rebuilt, body="hi")
    assert [c.tool for c in upstream.calls if c.server == "mail"] == []
    call(invoker, "crm", "update", email=EMAIL)  # back to its source is fine


def test_flow_rules_allow_a_plain_value_where_the_token_may_go() -> None:
    invoker, upstream = make({"flows": {"crm": ["mail"]}})
    call(invoker, "crm", "contact")
    call(invoker, "mail", "send", to=EMAIL)
    assert upstream.calls[-1].arguments == {"to": EMAIL}


def _session(invoker: PrivacyInvoker) -> Session:
    chain = InvokerChain(invoker, invoker, Budget(BudgetSettings()))
    return Session("h1", None, sandbox=cast(Any, None), chain=chain)


def test_every_field_of_a_result_is_scanned() -> None:
    invoker, _ = make()
    call(invoker, "crm", "contact")
    result = ExecutionResult(
        status="error",
        exit_code=1,
        stdout=f"a {EMAIL}",
        stderr=f"b {PHONE}",
        error={
            "type": "maria.lopez@globex.example.com",
            "message": f"m {EMAIL}",
            "traceback": f"t {PHONE}",
            "detail": {"nested": [EMAIL]},
        },
        files={"created": [f"{EMAIL}.txt"], "modified": [], "deleted": []},
        tool_calls={"count": 1, "by_tool": {f"crm.{EMAIL}": {"calls": 1, "failures": 0}}},
        duration_ms=1.0,
        truncated={},
        hint=f"h {PHONE}",
        limit=f"limit {PHONE}",
        workspace_tree=f"step {EMAIL}",
        files_not_carried=[f"{PHONE}.txt"],
        checkpoint=f"not saved: {EMAIL}",
        restored=Restore([f"{EMAIL}.csv"], [], "idle", error=f"unreadable {PHONE}"),
    )
    finished = _session(invoker).finish(result)
    text = json.dumps(finished.to_dict())
    assert_no_pii(text)
    assert not reveals(text, EMAIL) and not reveals(text, PHONE), text
    assert finished.session == "h1"


def test_a_results_own_keys_are_left_as_they_are_and_the_names_under_them_scanned() -> None:
    # A pattern that matches the host's words: were the keys scanned, they would be replaced.
    invoker, _ = make({"patterns": {"CODE_WORD": r"\b(?:created|count|calls|stdout_bytes)\b"}})
    result = ExecutionResult(
        status="ok",
        exit_code=0,
        stdout="",
        stderr="",
        error=None,
        files={"created": ["count.txt"], "modified": [], "deleted": []},
        tool_calls={"count": 1, "by_tool": {"crm.calls": {"calls": 1, "failures": 0}}},
        duration_ms=1.0,
        truncated={"stdout_bytes": 0},
        hint="",
    )
    finished = _session(invoker).finish(result)
    assert set(finished.files) == {"created", "modified", "deleted"}
    assert finished.truncated == {"stdout_bytes": 0}
    assert set(finished.tool_calls) == {"count", "by_tool"}
    (name,) = finished.tool_calls["by_tool"]
    assert "calls" not in name, "a tool's name is the code's: it is scanned"
    assert finished.tool_calls["by_tool"][name] == {"calls": 1, "failures": 0}
    assert "count" not in finished.files["created"][0], "a file's name is scanned"

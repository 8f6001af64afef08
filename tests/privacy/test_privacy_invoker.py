"""PrivacyInvoker around a fake upstream: flow rules, error messages, output scan, and a CRM ->
mail round trip in which the model-visible side holds no personal data."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from codemode.demo.leads import generate_leads
from codemode.errors import ToolError, ToolNotFoundError
from codemode.privacy import (
    DataFlowDeniedError,
    PrivacyInvoker,
    PrivacySettings,
    Vault,
    assert_no_pii,
    find_pii,
    scan_output,
)
from codemode.tools import ToolCall

LEADS = generate_leads(7)


def contact_page(offset: int = 0, limit: int = 300) -> dict[str, Any]:
    """The demo CRM's ``list_contacts`` result shape."""
    rows = LEADS[offset : offset + limit]
    return {
        "total": len(LEADS),
        "offset": offset,
        "contacts": [
            {
                "lead_id": lead.id,
                "name": lead.contact_name,
                "title": lead.title,
                "company": lead.company,
                "email": lead.email,
                "phone": lead.phone,
                "country": lead.country,
            }
            for lead in rows
        ],
    }


REPORT = "Orders shipped on time. " * 400 + "Questions to ops@example.com."


class FakeUpstream:
    """Records every call it receives; answers like the demo CRM and mail servers."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        self.calls.append(call)
        args = call.arguments
        if (call.server, call.tool) == ("crm", "list_contacts"):
            return contact_page(args.get("offset", 0), args.get("limit", 300))
        if (call.server, call.tool) == ("crm", "get_contact"):
            return contact_page(0, 1)["contacts"][0]
        if call.tool == "add_subscriber":
            return {
                "list_name": args["list_name"],
                "email": str(args["email"]).lower(),
                "name": args.get("name", ""),
                "added": True,
            }
        if call.tool == "unsubscribe":
            raise ToolError(f"{args['email']} is not on {args['list_name']}", fix="check the list")
        if call.tool == "lookup":
            raise ToolNotFoundError(f"no tool for {args['email']}")
        if call.tool == "read":  # a document the server holds: not the code's own text
            return {"document": f"Report {args['name']}\n" + REPORT}
        return {"ok": True, "args": args}


def make(table: dict[str, Any] | None = None) -> tuple[PrivacyInvoker, FakeUpstream, Vault]:
    upstream = FakeUpstream()
    vault = Vault()
    settings = PrivacySettings.from_mapping(table or {}, "test.toml")
    return PrivacyInvoker(upstream, vault, settings), upstream, vault


def call(invoker: PrivacyInvoker, server: str, tool: str, **arguments: Any) -> Any:
    return invoker.invoke(ToolCall(server, tool, arguments), timeout_s=5)


def test_crm_to_mail_round_trip_keeps_pii_from_the_model() -> None:
    invoker, upstream, _vault = make(
        {"flows": {"crm": ["mail"]}, "fields": {"crm": ["contacts[].name"]}}
    )
    model_sees: list[Any] = []

    # The agent's code, as it would run in the sandbox (it only ever holds tokens):
    page = call(invoker, "crm", "list_contacts", limit=50)
    model_sees.append(page)
    printed: list[str] = []
    for contact in page["contacts"]:
        added = call(
            invoker,
            "mail",
            "add_subscriber",
            list_name="newsletter",
            email=contact["email"],
            name=contact["name"],
        )
        printed.append(f"{contact['name']} <{added['email']}> {contact['phone']} {added['added']}")
    # ... plus two values that reach stdout in clear (a literal in the code, a rebuilt value)
    first = LEADS[0]
    printed.append(f"debug: {first.email} / {first.contact_name} / call +44 20 7946 0000")
    stdout = invoker.scan_output("\n".join(printed))
    model_sees.append({"status": "ok", "stdout": stdout})

    # The code side held no email or phone number and no contact name.
    code_side = json.dumps(page)
    for lead in LEADS[:50]:
        assert lead.email not in code_side
        assert lead.phone not in code_side
        assert lead.contact_name not in code_side
    assert all(c["email"].startswith("<EMAIL_") for c in page["contacts"])
    assert all(c["phone"].startswith("<PHONE_") for c in page["contacts"])
    assert page["contacts"][0]["company"] == LEADS[0].company  # the rest is untouched

    # The mail tool received the real values.
    mail_calls = [c for c in upstream.calls if c.server == "mail"]
    assert [c.arguments["email"] for c in mail_calls] == [lead.email for lead in LEADS[:50]]
    assert [c.arguments["name"] for c in mail_calls] == [lead.contact_name for lead in LEADS[:50]]

    # Everything the model would see, serialized, holds no PII.
    everything = json.dumps(model_sees)
    assert_no_pii(everything)
    for lead in LEADS[:50]:
        assert lead.contact_name not in everything
    assert stdout.splitlines()[0].startswith(page["contacts"][0]["name"])
    assert f"debug: {page['contacts'][0]['email']} / {page['contacts'][0]['name']}" in stdout


def test_forbidden_destination_is_blocked_before_the_call() -> None:
    invoker, upstream, _vault = make({"flows": {"crm": ["mail"]}})
    contact = call(invoker, "crm", "get_contact", lead_id="LEAD-0001")
    upstream.calls.clear()
    with pytest.raises(DataFlowDeniedError) as caught:
        call(invoker, "analytics", "track", event=f"lead {contact['email']}")
    assert upstream.calls == []
    message = str(caught.value)
    assert contact["email"] in message  # the token, never the value
    assert LEADS[0].email not in message
    assert "'crm'" in message and "'analytics'" in message
    assert "privacy.flows.crm" in message
    assert 'list "analytics" in [privacy.flows] crm' in message
    assert isinstance(caught.value, ToolError)


def test_permitted_destinations_and_the_source_itself() -> None:
    invoker, upstream, _vault = make({"flows": {"crm": ["mail", "archive-*"]}})
    contact = call(invoker, "crm", "get_contact", lead_id="LEAD-0001")
    call(invoker, "mail", "send", to=contact["email"])
    call(invoker, "archive-eu", "store", who=contact["phone"])
    call(invoker, "crm", "update", email=contact["email"])
    received = [c.arguments for c in upstream.calls[1:]]
    assert received == [
        {"to": LEADS[0].email},
        {"who": LEADS[0].phone},
        {"email": LEADS[0].email},
    ]


def test_default_flow_is_back_to_the_source_only() -> None:
    invoker, _upstream, _vault = make()
    contact = call(invoker, "crm", "get_contact", lead_id="LEAD-0001")
    with pytest.raises(DataFlowDeniedError, match=r'privacy\.flows\."\*" \(default'):
        call(invoker, "mail", "send", to=contact["email"])
    call(invoker, "crm", "update", email=contact["email"])

    open_invoker, upstream, _ = make({"flows": {"*": ["*"]}})
    contact = call(open_invoker, "crm", "get_contact", lead_id="LEAD-0001")
    call(open_invoker, "mail", "send", to=contact["email"])
    assert upstream.calls[-1].arguments == {"to": LEADS[0].email}


def test_value_echoed_by_the_destination_keeps_its_origin_rules() -> None:
    invoker, upstream, vault = make({"flows": {"crm": ["mail"], "mail": ["*"]}})
    contact = call(invoker, "crm", "get_contact", lead_id="LEAD-0001")
    added = call(invoker, "mail", "add_subscriber", list_name="n", email=contact["email"])
    assert added["email"] == contact["email"]  # same value, same token
    entry = vault.lookup(contact["email"])
    assert entry is not None and entry.origins == {"crm"}
    # mail may send its data anywhere, but this is crm's data: still only to mail and crm
    with pytest.raises(DataFlowDeniedError):
        call(invoker, "analytics", "track", who=added["email"])
    call(invoker, "crm", "update", email=added["email"])
    assert upstream.calls[-1].arguments == {"email": LEADS[0].email}


def test_unknown_tokens_pass_through_unchanged() -> None:
    invoker, upstream, _vault = make()
    call(invoker, "mail", "send", to="<EMAIL_42>", body="Hi <NAME_1>")
    assert upstream.calls[-1].arguments == {"to": "<EMAIL_42>", "body": "Hi <NAME_1>"}


def test_tokens_from_printed_output_may_go_anywhere() -> None:
    invoker, upstream, _vault = make()
    stdout = invoker.scan_output("found someone@example.org in the file")
    token = stdout.split()[1]
    assert token == "<EMAIL_1>"
    call(invoker, "mail", "send", to=token)
    assert upstream.calls[-1].arguments == {"to": "someone@example.org"}


def test_tool_errors_are_tokenized_and_keep_their_class() -> None:
    invoker, _upstream, _vault = make({"flows": {"crm": ["mail"]}})
    contact = call(invoker, "crm", "get_contact", lead_id="LEAD-0001")
    with pytest.raises(ToolError) as caught:
        call(invoker, "mail", "unsubscribe", list_name="n", email=contact["email"])
    assert type(caught.value) is ToolError
    assert caught.value.message == f"{contact['email']} is not on n"
    assert caught.value.fix == "check the list"
    with pytest.raises(ToolNotFoundError) as not_found:
        call(invoker, "mail", "lookup", email=contact["email"])
    assert LEADS[0].email not in str(not_found.value)


def test_disabled_privacy_passes_everything_through() -> None:
    invoker, _upstream, vault = make({"enabled": False})
    page = call(invoker, "crm", "list_contacts", limit=3)
    assert page == contact_page(0, 3)
    assert invoker.scan_output(LEADS[0].email) == LEADS[0].email
    assert len(vault) == 0


def test_wipe_forgets_values_and_caches() -> None:
    invoker, _upstream, vault = make()
    contact = call(invoker, "crm", "get_contact", lead_id="LEAD-0001")
    assert invoker._tokenizer._recall is not None
    invoker.wipe()
    assert len(vault) == 0
    assert invoker._tokenizer.detectors._cached.cache_info().currsize == 0
    assert invoker._tokenizer._recall is None  # the index of the values went with them
    # an old token is now unknown: it passes through as text and reveals nothing
    assert call(invoker, "crm", "echo", x=contact["email"])["args"] == {"x": contact["email"]}


def test_scan_output_function_uses_the_vault() -> None:
    vault = Vault()
    invoker, _upstream, _ = make()
    assert scan_output("", vault) == ""
    first = scan_output("mail a@example.com, call 020 7946 0958", vault)
    assert first == "mail <EMAIL_1>, call <PHONE_1>"
    assert scan_output("again a@example.com", vault) == "again <EMAIL_1>"
    assert invoker.vault is not vault


def test_tokenizing_300_contacts_is_fast() -> None:
    invoker, _upstream, _vault = make({"fields": {"crm": ["contacts[].name"]}})
    page = contact_page()
    tokenizer = invoker._tokenizer
    costs = []
    for _ in range(3):
        # This thread's CPU time, the best of three: other processes on a loaded machine and
        # one garbage collection do not count (a wall-clock bound failed once at 0.28 s in CI
        # while another test suite ran beside it).
        started = time.thread_time()
        out = tokenizer.tokenize(page, Vault(), server="crm", tool="list_contacts")
        costs.append(time.thread_time() - started)
        assert find_pii(json.dumps(out)) == []
    # ~5-10 ms on an idle machine (see the report); a slow path (a regex per value) takes
    # seconds.
    assert min(costs) < 0.25


def test_assert_no_pii() -> None:
    assert_no_pii(json.dumps({"stdout": "<EMAIL_1> <PHONE_2>", "duration_ms": 1234}))
    with pytest.raises(AssertionError, match=r"EMAIL 'a@example\.com'"):
        assert_no_pii("contact a@example.com")
    # JSON escapes do not hide a value
    escaped = json.dumps({"stdout": "done\n+1 415 555 0142"})
    assert "\\n+1 415" in escaped
    with pytest.raises(AssertionError, match="PHONE"):
        assert_no_pii(escaped)
    assert_no_pii("contact a@example.com", allow=["a@example.com"])
    assert_no_pii("contact a@example.com", kinds=["PHONE"])


def test_public_api() -> None:
    import codemode.privacy

    assert sorted(codemode.privacy.__all__) == sorted(
        [
            "BUILTIN_KINDS",
            "OUTPUT_SOURCE",
            "DataFlowDeniedError",
            "Detection",
            "DetectorSet",
            "PrivacyInvoker",
            "PrivacySettings",
            "TokenSource",
            "Tokenizer",
            "Vault",
            "assert_no_pii",
            "detokenize",
            "find_pii",
            "scan_output",
        ]
    )


def test_dropping_the_caches_keeps_the_vault_and_forgets_the_results() -> None:
    invoker, _upstream, vault = make()
    first = call(invoker, "docs", "read", name="May")
    tokens = len(vault)
    assert tokens == 1 and invoker._tokenizer._cleared  # the long text is kept
    invoker.drop_caches()
    assert not invoker._tokenizer._cleared
    assert len(vault) == tokens
    assert call(invoker, "docs", "read", name="May") == first  # the same token again


def test_scan_value_scans_every_string_and_passes_other_leaves_untouched() -> None:
    """A result's reports go through ``scan_value``: strings anywhere (dict keys too, but the
    caller's own words) are scanned; counts, flags and None are passed on as they are."""
    privacy = PrivacyInvoker(FakeUpstream(), Vault(), PrivacySettings())
    marker = object()
    value = {
        "created": ["notes for ana.silva@example.com.txt"],
        "ana.silva@example.com": (1, 2.5, True, None, marker),
        "count": {"nested": [{"deep": "call +44 20 7946 0958"}]},
        "by_tool": {},
    }
    scanned = privacy.scan_value(value, plain_keys={"created", "count", "by_tool"})
    assert "ana.silva@example.com" not in json.dumps(scanned, default=repr)
    assert "7946 0958" not in json.dumps(scanned, default=repr)
    [email_key] = [key for key in scanned if key not in {"created", "count", "by_tool"}]
    assert email_key.startswith("<EMAIL_")
    assert scanned[email_key] == [1, 2.5, True, None, marker]
    assert scanned[email_key][4] is marker
    assert scanned["created"][0].startswith("notes for <EMAIL_")
    assert scanned["count"]["nested"][0]["deep"].startswith("call <PHONE_")
    assert scanned["by_tool"] == {}
    assert scanned is not value and scanned["by_tool"] is not value["by_tool"]  # a copy
    assert value["created"] == ["notes for ana.silva@example.com.txt"]  # the original kept


def test_scan_value_with_privacy_off_returns_the_value_itself() -> None:
    value = {"email": "ana.silva@example.com"}
    off = PrivacyInvoker(FakeUpstream(), Vault(), PrivacySettings(enabled=False))
    assert off.scan_value(value) is value

"""Policy.decide: rules first (first match wins), then read-only mode, destructive default, allow."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.policy import Policy, PolicySettings
from codemode.tools import ToolCall, ToolSpec

SPECS = {
    ("crm", "search_contacts"): ToolSpec("crm", "search_contacts", read_only=True),
    ("crm", "delete_contact"): ToolSpec("crm", "delete_contact", destructive=True),
    ("crm", "update_contact"): ToolSpec(
        "crm", "update_contact", read_only=False, destructive=False
    ),
    ("crm", "notes"): ToolSpec("crm", "notes"),  # an MCP tool with no annotations
    ("mail", "send_email"): ToolSpec("mail", "send_email"),
    ("api", "get_user"): ToolSpec("api", "get_user", source="openapi", method="GET", path="/u"),
    ("api", "delete_user"): ToolSpec(
        "api", "delete_user", source="openapi", method="DELETE", path="/u"
    ),
    ("api", "post_user"): ToolSpec("api", "post_user", source="openapi", method="POST", path="/u"),
}


def policy(**table: Any) -> Policy:
    return Policy(PolicySettings.from_mapping(table, "test"), lambda s, t: SPECS.get((s, t)))


def decide(p: Policy, name: str) -> tuple[str, str | None]:
    server, tool = name.split(".", 1)
    decision = p.decide(ToolCall(server, tool, {}))
    return decision.action, decision.rule


def test_everything_is_allowed_without_config_except_destructive_tools_ask() -> None:
    p = policy()
    assert decide(p, "crm.search_contacts") == ("allow", None)
    assert decide(p, "crm.update_contact") == ("allow", None)  # destructiveHint false
    assert decide(p, "nowhere.unknown") == ("allow", None)
    assert decide(p, "api.post_user") == ("allow", None)
    assert decide(p, "crm.delete_contact") == ("ask", None)  # MCP destructiveHint
    assert decide(p, "api.delete_user") == ("ask", None)  # OpenAPI DELETE


def test_an_unannotated_mcp_tool_is_destructive_as_the_mcp_spec_says() -> None:
    p = policy()
    decision = p.decide(ToolCall("crm", "notes", {}))
    assert decision.action == "ask"
    assert "no annotations" in decision.reason and "MCP default" in decision.reason
    assert "annotations_default" in decision.reason and "read_only_tools" in decision.reason
    # Marked read-only in the config: not destructive, so it runs without asking.
    assert decide(policy(read_only_tools=["crm.notes"]), "crm.notes") == ("allow", None)
    # A tool that declares only readOnlyHint true is not destructive either.
    reader = ToolSpec("crm", "read", read_only=True)
    assert p.decide(ToolCall("crm", "read", {}), reader).action == "allow"
    # destructiveHint means nothing for a read-only tool (MCP).
    both = ToolSpec("crm", "odd", read_only=True, destructive=True)
    assert p.decide(ToolCall("crm", "odd", {}), both).action == "allow"


@pytest.mark.parametrize("default", ["allow", "deny"])
def test_destructive_default_is_configurable(default: str) -> None:
    assert decide(policy(destructive=default), "crm.delete_contact") == (default, None)
    assert decide(policy(destructive=default), "crm.notes") == (default, None)
    assert decide(policy(destructive=default), "crm.update_contact") == ("allow", None)


def test_first_matching_rule_wins() -> None:
    p = policy(
        rules=[
            {"tools": ["crm.delete_*"], "action": "deny"},
            {"tools": ["crm.*"], "action": "ask"},
            {"tools": ["*"], "action": "allow"},
        ]
    )
    assert decide(p, "crm.delete_contact") == ("deny", "policy.rules[0]")
    assert decide(p, "crm.search_contacts") == ("ask", "policy.rules[1]")
    assert decide(p, "mail.send_email") == ("allow", "policy.rules[2]")


def test_rules_come_before_the_destructive_default() -> None:
    p = policy(rules=[{"tools": ["crm.delete_contact"], "action": "allow"}])
    assert decide(p, "crm.delete_contact") == ("allow", "policy.rules[0]")


def test_globs_are_over_server_dot_tool_and_case_sensitive() -> None:
    p = policy(rules=[{"tools": ["mail.send_?mail", "crm.[nx]otes"], "action": "deny"}])
    assert decide(p, "mail.send_email")[0] == "deny"
    assert decide(p, "crm.notes")[0] == "deny"
    assert decide(p, "MAIL.send_email")[0] == "allow"
    assert decide(p, "crm.search_contacts")[0] == "allow"
    # A rule for one server does not leak to another with a similar name.
    assert decide(policy(rules=[{"tools": ["crm.*"], "action": "deny"}]), "crmx.notes")[0] == (
        "allow"
    )


def test_read_only_mode_allows_only_read_only_tools() -> None:
    p = policy(mode="read_only")
    assert decide(p, "crm.search_contacts") == ("allow", None)  # readOnlyHint
    assert decide(p, "api.get_user") == ("allow", None)  # OpenAPI GET
    for name in ("crm.update_contact", "crm.notes", "api.post_user", "nowhere.unknown"):
        assert decide(p, name) == ("deny", None), name
    # A destructive tool is not read-only either.
    assert decide(p, "crm.delete_contact") == ("deny", None)


def test_read_only_mode_with_config_marks() -> None:
    p = policy(mode="read_only", read_only_tools=["crm.no*", "mail.send_email"])
    assert decide(p, "crm.notes") == ("allow", None)
    assert decide(p, "mail.send_email") == ("allow", None)
    assert decide(p, "crm.update_contact") == ("deny", None)


def test_an_explicit_false_hint_beats_the_http_method() -> None:
    spec = ToolSpec("api", "get_x", source="openapi", method="GET", read_only=False)
    p = Policy(PolicySettings(mode="read_only"))
    assert p.decide(ToolCall("api", "get_x", {}), spec).action == "deny"


def test_explicit_rule_beats_read_only_mode() -> None:
    p = policy(mode="read_only", rules=[{"tools": ["crm.update_contact"], "action": "ask"}])
    assert decide(p, "crm.update_contact") == ("ask", "policy.rules[0]")


def test_reasons_explain_and_say_how_to_change() -> None:
    p = policy(mode="read_only", rules=[{"tools": ["mail.*"], "action": "deny", "reason": "r1"}])
    rule = p.decide(ToolCall("mail", "send_email", {}))
    assert "policy.rules[0]" in rule.reason
    assert "r1" in rule.reason
    mode = p.decide(ToolCall("crm", "notes", {}))
    assert "read_only_tools" in mode.reason
    assert 'mode = "default"' in mode.reason
    destructive = policy().decide(ToolCall("crm", "delete_contact", {}))
    assert "destructive" in destructive.reason


def test_a_failing_lookup_means_no_spec() -> None:
    def lookup(server: str, tool: str) -> ToolSpec:
        raise KeyError(tool)

    p = Policy(PolicySettings(mode="read_only"), lookup)
    assert p.decide(ToolCall("crm", "notes", {})).action == "deny"
    assert Policy(PolicySettings(), lookup).decide(ToolCall("crm", "notes", {})).action == "allow"

"""PolicySettings.from_mapping: the same table from TOML and from mcpServers JSON, and its errors."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest

from codemode.errors import ConfigError
from codemode.policy import BudgetSettings, PolicySettings, Rule

TOML = """
[policy]
mode = "read_only"
destructive = "deny"
read_only_tools = ["crm.search_*"]
[[policy.rules]]
tools = ["crm.delete_*"]
action = "deny"
reason = "deletes are done by hand"
[[policy.rules]]
tools = ["mail.*"]
action = "ask"
[policy.budget]
calls = 1000
per_tool = { "mail.send_email" = 20 }
rate_per_minute = 600
"""

JSON = """
{"mcpServers": {}, "codemode": {"policy": {
  "mode": "read_only",
  "destructive": "deny",
  "read_only_tools": ["crm.search_*"],
  "rules": [
    {"tools": ["crm.delete_*"], "action": "deny", "reason": "deletes are done by hand"},
    {"tools": ["mail.*"], "action": "ask"}
  ],
  "budget": {"calls": 1000, "per_tool": {"mail.send_email": 20}, "rate_per_minute": 600}
}}}
"""

EXPECTED = PolicySettings(
    mode="read_only",
    destructive="deny",
    read_only_tools=("crm.search_*",),
    rules=(
        Rule(
            tools=("crm.delete_*",),
            action="deny",
            label="policy.rules[0]",
            reason="deletes are done by hand",
        ),
        Rule(tools=("mail.*",), action="ask", label="policy.rules[1]"),
    ),
    budget=BudgetSettings(calls=1000, per_tool={"mail.send_email": 20}, rate_per_minute=600),
)


def test_toml_and_json_give_the_same_settings() -> None:
    from_toml = PolicySettings.from_mapping(tomllib.loads(TOML)["policy"], "codemode.toml")
    from_json = PolicySettings.from_mapping(json.loads(JSON)["codemode"]["policy"], "mcp.json")
    assert from_toml == EXPECTED
    assert from_json == EXPECTED


def test_defaults() -> None:
    settings = PolicySettings.from_mapping({}, "x")
    assert settings == PolicySettings()
    assert settings.mode == "default"
    assert settings.destructive == "ask"
    assert settings.budget == BudgetSettings(calls=None, per_tool={}, rate_per_minute=None)


def _error(table: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        PolicySettings.from_mapping(table, "/etc/codemode.toml")
    error = caught.value
    assert error.path == "/etc/codemode.toml"
    assert error.fix, "every config error says how to fix it"
    assert "/etc/codemode.toml" in str(error)
    return error


RULE = {"tools": ["crm.*"], "action": "allow"}


@pytest.mark.parametrize(
    ("table", "key", "in_fix"),
    [
        (
            {"rules": [RULE, {"tools": ["mail.*"], "action": "aks"}]},
            "policy.rules[1].action",
            "ask",
        ),
        ({"rules": [{"tools": ["mail.*"], "action": "block"}]}, "policy.rules[0].action", "deny"),
        ({"rules": [{"tools": ["mail.*"], "action": 1}]}, "policy.rules[0].action", "allow"),
        ({"rules": [{"tools": [], "action": "deny"}]}, "policy.rules[0].tools", "*"),
        ({"rules": [{"tools": "mail.*", "action": "deny"}]}, "policy.rules[0].tools", '["mail.*"]'),
        ({"rules": [{"tools": [""], "action": "deny"}]}, "policy.rules[0].tools[0]", "glob"),
        ({"rules": [{"tools": ["crm"], "action": "deny"}]}, "policy.rules[0].tools[0]", "crm.*"),
        ({"rules": [{"tools": [3], "action": "deny"}]}, "policy.rules[0].tools[0]", "glob"),
        ({"rules": [{"action": "deny"}]}, "policy.rules[0].tools", "tools ="),
        ({"rules": [{"tools": ["a.b"]}]}, "policy.rules[0].action", "action ="),
        (
            {"rules": [{"tools": ["a.b"], "action": "deny", "tool": 1}]},
            "policy.rules[0].tool",
            "tools",
        ),
        (
            {"rules": [{"tools": ["a.b"], "action": "deny", "reason": ""}]},
            "policy.rules[0].reason",
            "reason",
        ),
        ({"rules": {"tools": ["a.b"]}}, "policy.rules", "[[policy.rules]]"),
        ({"rules": ["a.b"]}, "policy.rules[0]", "[policy.rules[0]]"),
        ({"mode": "readonly"}, "policy.mode", "read_only"),
        ({"destructive": "prompt"}, "policy.destructive", "allow"),
        ({"read_only_tools": "crm.*"}, "policy.read_only_tools", '["crm.*"]'),
        ({"read_only_tools": ["crm"]}, "policy.read_only_tools[0]", "crm.*"),
        ({"rule": []}, "policy.rule", "rules"),
        ({"budget": {"calls": -1}}, "policy.budget.calls", "no limit"),
        ({"budget": {"calls": 1.5}}, "policy.budget.calls", "no limit"),
        ({"budget": {"calls": True}}, "policy.budget.calls", "no limit"),
        ({"budget": {"rate_per_minute": -5}}, "policy.budget.rate_per_minute", "no limit"),
        ({"budget": {"per_tool": {"mail.send": -1}}}, 'policy.budget.per_tool."mail.send"', "100"),
        ({"budget": {"per_tool": {"mail": 3}}}, "policy.budget.per_tool.mail", "mail.*"),
        ({"budget": {"per_tool": [1]}}, "policy.budget.per_tool", "[policy.budget.per_tool]"),
        ({"budget": {"call": 3}}, "policy.budget.call", "calls"),
        ({"budget": 5}, "policy.budget", "[policy.budget]"),
    ],
)
def test_each_bad_value_names_its_key_and_fix(table: dict[str, Any], key: str, in_fix: str) -> None:
    error = _error(table)
    assert error.key == key
    assert error.fix is not None
    assert in_fix in error.fix


def test_unknown_action_suggests_the_closest() -> None:
    error = _error({"rules": [{"tools": ["a.b"], "action": "alow"}]})
    assert error.fix is not None
    assert error.fix.startswith("did you mean 'allow'?")


def test_errors_from_json_data_match_toml_data() -> None:
    toml_table = tomllib.loads('[[policy.rules]]\ntools = ["mail.*"]\naction = "nope"\n')["policy"]
    json_table = json.loads('{"rules": [{"tools": ["mail.*"], "action": "nope"}]}')
    assert _error(toml_table).key == _error(json_table).key == "policy.rules[0].action"


def test_not_a_table() -> None:
    with pytest.raises(ConfigError) as caught:
        PolicySettings.from_mapping([], "x")  # type: ignore[arg-type]
    assert caught.value.key == "policy"

"""The ``[policy]`` config table: rules, read-only mode, the destructive default and budgets.

The same table arrives from ``codemode.toml`` (``[policy]``) and from the ``"codemode":
{"policy": {...}}`` key of an mcpServers JSON file. Every mistake raises ``ConfigError`` naming
the key (``policy.rules[1].action``; indices count from 0) and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, StrictInt, StrictStr, field_validator

from codemode.config_model import ConfigModel, Hint, invalid, show_value, validate_section

__all__ = ["Action", "ApprovalsMode", "BudgetSettings", "Mode", "PolicySettings", "Rule"]

Action = Literal["allow", "deny", "ask"]
Mode = Literal["default", "read_only"]
# Who answers a call that needs a human: "elicit" asks the client's user (MCP elicitation),
# "url" sends them to the gateway's approval page, "tool" lets the model call `approve`;
# "auto" elicits when the client declares the capability, else falls back to the tool.
ApprovalsMode = Literal["auto", "elicit", "tool", "url"]

_WILDCARDS = frozenset("*?[")


def _tool_glob(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid(
            f"must be a non-empty pattern string, not {show_value(value)}",
            'write a glob over "server.tool", e.g. "crm.search_*"',
        )
    # Names are always "server.tool": a plain word without a dot or wildcard matches nothing.
    if "." not in value and not _WILDCARDS & set(value):
        raise invalid(
            f"{value!r} can never match: tool names are written 'server.tool'",
            f"write {value + '.*'!r} for every tool of server {value!r}",
        )
    return value


ToolGlob = Annotated[str, BeforeValidator(_tool_glob)]
Count = Annotated[
    StrictInt, Field(ge=0), Hint(fix="write e.g. 100, or remove the key for no limit")
]


class Rule(ConfigModel):
    """``action`` for every tool whose ``server.tool`` name matches one of ``tools`` (globs)."""

    tools: Annotated[
        tuple[ToolGlob, ...],
        Field(min_length=1),
        Hint(fix='write tools = ["crm.delete_*"], or tools = ["*"] for every tool'),
    ]
    action: Action
    # Shown in decisions and the audit log; by default where the rule is, e.g. "policy.rules[0]".
    label: StrictStr = ""
    reason: Annotated[
        StrictStr | None,
        Field(min_length=1),
        Hint(fix='write reason = "why this rule exists", or remove it'),
    ] = None


class BudgetSettings(ConfigModel):
    """Per-session limits. None means no limit."""

    calls: Count | None = None
    # Keys are names or globs over "server.tool"; each matching tool gets its own counter.
    per_tool: Annotated[dict[ToolGlob, Count], Hint(expects="a table of tool = limit")] = Field(
        default_factory=dict
    )
    rate_per_minute: Count | None = None


class PolicySettings(ConfigModel):
    mode: Mode = "default"
    destructive: Action = "ask"
    read_only_tools: tuple[ToolGlob, ...] = ()
    rules: Annotated[
        tuple[Rule, ...],
        Hint(
            expects="a list of rules",
            fix='write [[policy.rules]] blocks (TOML) or "rules": [{...}] (JSON)',
        ),
    ] = ()
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    approvals: ApprovalsMode = "auto"

    @field_validator("rules", mode="after")
    @classmethod
    def _label_by_position(cls, rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
        return tuple(
            rule if rule.label else rule.model_copy(update={"label": f"policy.rules[{index}]"})
            for index, rule in enumerate(rules)
        )

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], source: str = "config") -> PolicySettings:
        """Build from the ``[policy]`` table (TOML) or the ``"policy"`` object (JSON)."""
        return validate_section(cls, table, source=source, prefix="policy")

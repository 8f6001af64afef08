"""The ``[policy]`` config table: rules, read-only mode, the destructive default and budgets.

The same table arrives from ``codemode.toml`` (``[policy]``) and from the ``"codemode":
{"policy": {...}}`` key of an mcpServers JSON file, so ``from_mapping`` takes plain dicts and
lists as ``tomllib`` or ``json.loads`` give them. Every mistake raises ``ConfigError`` naming the
key (``policy.rules[1].action``; indices count from 0) and the fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from codemode.errors import ConfigError

__all__ = ["Action", "BudgetSettings", "Mode", "PolicySettings", "Rule"]

Action = Literal["allow", "deny", "ask"]
Mode = Literal["default", "read_only"]

ACTIONS: tuple[Action, ...] = ("allow", "deny", "ask")
MODES: tuple[Mode, ...] = ("default", "read_only")
_POLICY_KEYS = frozenset({"mode", "destructive", "read_only_tools", "rules", "budget"})
_RULE_KEYS = frozenset({"tools", "action", "reason"})
_BUDGET_KEYS = frozenset({"calls", "per_tool", "rate_per_minute"})
_WILDCARDS = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class Rule:
    """``action`` for every tool whose ``server.tool`` name matches one of ``tools`` (globs)."""

    tools: tuple[str, ...]
    action: Action
    # Where it came from, e.g. "policy.rules[0]"; shown in decisions and error messages.
    label: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class BudgetSettings:
    """Per-session limits. None means no limit."""

    calls: int | None = None
    # Keys are names or globs over "server.tool"; each matching tool gets its own counter.
    per_tool: Mapping[str, int] = field(default_factory=dict)
    rate_per_minute: int | None = None


@dataclass(frozen=True, slots=True)
class PolicySettings:
    mode: Mode = "default"
    destructive: Action = "ask"
    read_only_tools: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    budget: BudgetSettings = field(default_factory=BudgetSettings)

    @classmethod
    def from_mapping(
        cls,
        table: Mapping[str, Any],
        source: str = "config",
        *,
        foreign_keys: Collection[str] = (),
    ) -> PolicySettings:
        """Build from the ``[policy]`` table. ``foreign_keys`` belong to other features (such
        as data-flow rules) and are skipped here rather than reported as unknown."""
        table = _mapping(table, source, "policy")
        _check_keys(table, _POLICY_KEYS | set(foreign_keys), source, "policy")
        mode = _choice(table.get("mode", "default"), MODES, source, "policy.mode")
        destructive = _choice(
            table.get("destructive", "ask"), ACTIONS, source, "policy.destructive"
        )
        read_only_tools = _globs(
            table.get("read_only_tools", []), source, "policy.read_only_tools", allow_empty=True
        )
        raw_rules = table.get("rules", [])
        if not isinstance(raw_rules, list):
            raise ConfigError(
                f"must be a list of rules, not {type(raw_rules).__name__}",
                path=source,
                key="policy.rules",
                fix='write [[policy.rules]] blocks (TOML) or "rules": [{...}] (JSON)',
            )
        rules = tuple(
            _rule(raw, source, f"policy.rules[{index}]") for index, raw in enumerate(raw_rules)
        )
        budget = _budget(table.get("budget", {}), source)
        return cls(
            mode=cast(Mode, mode),
            destructive=cast(Action, destructive),
            read_only_tools=read_only_tools,
            rules=rules,
            budget=budget,
        )


def _rule(raw: Any, source: str, key: str) -> Rule:
    table = _mapping(raw, source, key)
    _check_keys(table, _RULE_KEYS, source, key)
    for required in ("tools", "action"):
        if required not in table:
            raise ConfigError(
                f"a rule needs {required!r}",
                path=source,
                key=f"{key}.{required}",
                fix='write tools = ["server.tool_*"] and action = "allow" | "deny" | "ask"',
            )
    tools = _globs(table["tools"], source, f"{key}.tools", allow_empty=False)
    action = _choice(table["action"], ACTIONS, source, f"{key}.action")
    reason = table.get("reason")
    if reason is not None and (not isinstance(reason, str) or not reason.strip()):
        raise ConfigError(
            "must be a non-empty string",
            path=source,
            key=f"{key}.reason",
            fix='write reason = "why this rule exists", or remove it',
        )
    return Rule(tools=tools, action=cast(Action, action), label=key, reason=reason)


def _budget(raw: Any, source: str) -> BudgetSettings:
    table = _mapping(raw, source, "policy.budget")
    _check_keys(table, _BUDGET_KEYS, source, "policy.budget")
    calls = _count(table.get("calls"), source, "policy.budget.calls")
    rate = _count(table.get("rate_per_minute"), source, "policy.budget.rate_per_minute")
    per_tool_table = _mapping(table.get("per_tool", {}), source, "policy.budget.per_tool")
    per_tool: dict[str, int] = {}
    for name, value in per_tool_table.items():
        key = f'policy.budget.per_tool."{name}"'
        _check_glob(name, source, key)
        limit = _count(value, source, key)
        assert limit is not None  # _count returns None only for None
        per_tool[name] = limit
    return BudgetSettings(calls=calls, per_tool=per_tool, rate_per_minute=rate)


# --- value checks -------------------------------------------------------------------------------


def _mapping(value: Any, source: str, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"must be a table/object, not {type(value).__name__}",
            path=source,
            key=key,
            fix=f"write [{key}] with keys below it (TOML) or an object (JSON)",
        )
    return value


def _check_keys(table: Mapping[str, Any], known: Collection[str], source: str, prefix: str) -> None:
    for name in table:
        if name in known:
            continue
        close = difflib.get_close_matches(str(name), sorted(known), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"use one of: {', '.join(sorted(known))}"
        raise ConfigError(f"unknown key {name!r}", path=source, key=f"{prefix}.{name}", fix=hint)


def _choice(value: Any, choices: tuple[str, ...], source: str, key: str) -> str:
    if isinstance(value, str) and value in choices:
        return value
    options = " | ".join(repr(c) for c in choices)
    close = difflib.get_close_matches(value, choices, n=1) if isinstance(value, str) else []
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(
        f"unknown value {value!r}", path=source, key=key, fix=f"{hint}use one of {options}"
    )


def _globs(value: Any, source: str, key: str, *, allow_empty: bool) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ConfigError(
            "must be a list of patterns, not a single string",
            path=source,
            key=key,
            fix=f"write [{value!r}]",
        )
    if not isinstance(value, list):
        raise ConfigError(
            f"must be a list of patterns, not {type(value).__name__}",
            path=source,
            key=key,
            fix='write ["server.tool", "server.prefix_*"]',
        )
    if not value and not allow_empty:
        raise ConfigError(
            "a rule with no tool patterns matches nothing",
            path=source,
            key=key,
            fix='list at least one pattern such as "crm.delete_*", or "*" for every tool',
        )
    for index, item in enumerate(value):
        _check_glob(item, source, f"{key}[{index}]")
    return tuple(value)


def _check_glob(pattern: Any, source: str, key: str) -> None:
    if not isinstance(pattern, str) or not pattern.strip():
        raise ConfigError(
            f"must be a non-empty pattern string, not {pattern!r}",
            path=source,
            key=key,
            fix='write a glob over "server.tool", e.g. "crm.search_*"',
        )
    # Names are always "server.tool": a plain word without a dot or wildcard matches nothing.
    if "." not in pattern and not _WILDCARDS & set(pattern):
        raise ConfigError(
            f"{pattern!r} can never match: tool names are written 'server.tool'",
            path=source,
            key=key,
            fix=f"write {pattern + '.*'!r} for every tool of server {pattern!r}",
        )


def _count(value: Any, source: str, key: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            f"must be a whole number of at least 0, not {value!r}",
            path=source,
            key=key,
            fix="write e.g. 100, or remove the key for no limit",
        )
    return value

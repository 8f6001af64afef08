"""MCP tools that declare no annotations: which ones this policy will ask for, and the config
that marks them. Used by the startup warning, ``codemode doctor`` and the generated stubs, so
all three say what the policy will do (and stop counting a tool once config marks it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from codemode.policy.engine import Policy
from codemode.policy.settings import PolicySettings
from codemode.tools import ToolCall, ToolSpec

__all__ = [
    "asking_unannotated",
    "policy_note",
    "unannotated_advice",
    "unannotated_fix",
    "unannotated_summary",
]

_LISTED = 8


def _unannotated(spec: ToolSpec) -> bool:
    return spec.source == "mcp" and spec.destructive is None and spec.read_only is not True


def asking_unannotated(
    specs: Iterable[ToolSpec], settings: PolicySettings
) -> dict[str, tuple[list[str], int]]:
    """Server -> (its tools that ask only because they declare no annotations, its MCP tools)."""
    policy = Policy(settings)
    found: dict[str, tuple[list[str], int]] = {}
    for spec in specs:
        if spec.source != "mcp":
            continue
        asking, total = found.get(spec.server, ([], 0))
        if _unannotated(spec):
            decision = policy.decide(ToolCall(spec.server, spec.name, {}), spec)
            if decision.action == "ask" and decision.rule is None:
                asking.append(spec.name)
        found[spec.server] = (asking, total + 1)
    return {server: entry for server, entry in found.items() if entry[0]}


def unannotated_summary(asking: dict[str, tuple[list[str], int]]) -> str:
    """``sqlite (3 of 5): create_table, drop_table, insert`` for each server."""
    parts = []
    for server, (tools, total) in asking.items():
        shown = ", ".join(tools[:_LISTED]) + (", ..." if len(tools) > _LISTED else "")
        parts.append(f"{server} ({len(tools)} of {total}): {shown}")
    return "; ".join(parts)


def unannotated_fix(asking: dict[str, tuple[list[str], int]]) -> str:
    """The exact config lines that mark them."""
    names = [f"{server}.{tool}" for server, (tools, _) in asking.items() for tool in tools]
    servers = " or ".join(f"[servers.{server}]" for server in asking)
    return (
        f"for the ones that only read, add [policy] read_only_tools = "
        f"{json.dumps(names[:_LISTED])}; to trust a whole server, set "
        f'annotations_default = "read_only" or "not_destructive" in {servers}'
    )


def unannotated_advice(specs: Iterable[ToolSpec], settings: PolicySettings) -> str | None:
    """One paragraph: which tools ask only for want of annotations, and the exact config lines
    that mark them; None when there are none."""
    asking = asking_unannotated(specs, settings)
    if not asking:
        return None
    return (
        "tools without annotations count as destructive, as the MCP spec's defaults say, and "
        f"ask for approval under this policy: {unannotated_summary(asking)}. To change that, "
        + unannotated_fix(asking)
    )


def policy_note(spec: ToolSpec, policy: Policy) -> str | None:
    """What the policy will do with a call of this tool, in a few words (for its stub)."""
    name = spec.qualified_name
    decision = policy.decide(ToolCall(spec.server, spec.name, {}), spec)
    if decision.action == "deny":
        return f"denied by the policy ({decision.rule or 'see [policy]'})"
    if decision.action == "ask":
        if decision.rule is not None:
            return f"asks for approval ({decision.rule})"
        if _unannotated(spec):
            return (
                "asks for approval (no annotations; mark it read-only with [policy] "
                f'read_only_tools = ["{name}"])'
            )
        return "destructive: asks for approval"
    if policy.is_read_only(name, spec):
        read_only_by_config = spec.read_only is not True and not (
            spec.source == "openapi" and (spec.method or "").lower() in ("get", "head", "options")
        )
        return "read-only by config" if read_only_by_config else "read-only"
    if policy.is_destructive(name, spec):
        return f"destructive; runs without approval ({decision.rule or 'policy.destructive'})"
    return None

"""The tools an agent sees: ``search``, ``execute`` and ``approve``. Plain data, plus ``mcp`` Tools.

The descriptions are the whole manual: they teach the workflow (search, import, call, print
little, keep state in the session, catch ``ToolError``) in as few tokens as we could.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codemode.search.render import DEFAULT_HEAD

if TYPE_CHECKING:
    from mcp.types import Tool

__all__ = ["APPROVE", "EXECUTE", "META_TOOLS", "SEARCH", "mcp_tools", "tool_definitions"]

SEARCH: dict[str, Any] = {
    "name": "search",
    "description": (
        "Find Python functions for your task among the available tools. "
        "Returns the best matches with signatures, then more by name. "
        "detail: name, summary (default) or full (source with docs)."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What you want to do"},
            "detail": {"type": "string", "enum": ["name", "summary", "full"]},
            "limit": {"type": "integer", "minimum": 1, "default": DEFAULT_HEAD},
            "part": {"type": "integer"},
        },
        "required": ["query"],
    },
}

EXECUTE: dict[str, Any] = {
    "name": "execute",
    "description": (
        "Run Python code in a sandbox. Use functions found by search: "
        "`from servers import github` then `github.some_tool(...)`. "
        "Only printed output comes back: print just what you need and keep big data in "
        "variables or files. Variables and files persist in a session: pass back the returned "
        '`session` ("new" opens another; fresh=true clears variables, keeps files; '
        "fresh_dir=true starts in a new folder). A failed tool call raises ToolError."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "code": {"type": "string"},
            "session": {"type": "string"},
            "fresh": {"type": "boolean"},
            "fresh_dir": {"type": "boolean"},
            "check": {"type": "boolean"},
        },
        "required": ["code"],
    },
}

APPROVE: dict[str, Any] = {
    "name": "approve",
    "description": (
        "Resume an execution paused with status approval_required, once the user decided: "
        "allow=false makes the call raise ToolError."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "approval": {"type": "string"},
            "allow": {"type": "boolean"},
            "remember": {"enum": ["call", "tool", "server"]},
        },
        "required": ["approval", "allow"],
    },
    # Destructive and not idempotent: clients that confirm such tools with their user ask
    # before the model's answer counts (a client that elicits never needs this tool).
    "annotations": {
        "title": "Approve a paused call (confirm with the user)",
        "read_only_hint": False,
        "destructive_hint": True,
        "idempotent_hint": False,
        "open_world_hint": True,
    },
}

META_TOOLS: tuple[dict[str, Any], ...] = (SEARCH, EXECUTE, APPROVE)


def tool_definitions() -> list[dict[str, Any]]:
    """The definitions as an MCP client puts them in context (wire names: ``inputSchema``)."""
    return [
        {"name": t["name"], "description": t["description"], "inputSchema": t["input_schema"]}
        for t in META_TOOLS
    ]


def mcp_tools() -> list[Tool]:
    from mcp.types import Tool, ToolAnnotations

    return [
        Tool(
            name=t["name"],
            description=t["description"],
            input_schema=t["input_schema"],
            annotations=ToolAnnotations(**t["annotations"]) if "annotations" in t else None,
        )
        for t in META_TOOLS
    ]

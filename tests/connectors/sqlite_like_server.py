"""An MCP server over stdio that behaves like mcp-server-sqlite (run: python sqlite_like_server.py).

Built on the official SDK's low-level ``Server`` so that results are exactly what older servers
send: text only, no structured content, no annotations. ``list_tables`` answers ``"[]"`` (valid
JSON) while there are no tables and a Python repr (not JSON) once there are some, as
mcp-server-sqlite does. ``count_tables`` declares an output schema but still answers with JSON
text only, as servers written before structured content did. ``drop_table`` is unannotated, so
by the MCP spec's defaults it is destructive.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TABLES: list[str] = []

TOOLS = [
    types.Tool(
        name="list_tables",
        description="List the tables.",
        input_schema={"type": "object", "properties": {}},
    ),
    types.Tool(
        name="create_table",
        description="Create a table.",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    ),
    types.Tool(
        name="drop_table",
        description="Drop a table.",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    ),
    types.Tool(
        name="count_tables",
        description="How many tables there are.",
        input_schema={"type": "object", "properties": {}},
        output_schema={
            "type": "object",
            "properties": {"count": {"type": "integer"}},
            "required": ["count"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="echo",
        description="Return the text as it is.",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
]


def text(value: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)])


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = dict(params.arguments or {})
    if params.name == "list_tables":
        return text(str([{"name": name} for name in TABLES]))
    if params.name == "create_table":
        TABLES.append(arguments["name"])
        return text(f"created {arguments['name']}")
    if params.name == "drop_table":
        TABLES.remove(arguments["name"])
        return text(f"dropped {arguments['name']}")
    if params.name == "count_tables":
        return text(json.dumps({"count": len(TABLES)}))
    if params.name == "echo":
        return text(arguments["text"])
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"unknown tool {params.name}")],
        is_error=True,
    )


async def main() -> None:
    server: Server[Any] = Server("sqlite-like", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)

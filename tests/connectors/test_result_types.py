"""Stable result types: text stays text unless the tool declares structured output or the
server's config says to decode JSON; the generated stubs say which.

The upstream is a real MCP server over stdio (tests/connectors/sqlite_like_server.py) that
answers like mcp-server-sqlite: "[]" while empty, a Python repr (not JSON) once it has rows.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from codemode.config import load_config
from codemode.connectors.factory import build_connector
from codemode.connectors.mcp import MCPConnector, StdioTarget
from codemode.stubs import render_tool_module

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).with_name("sqlite_like_server.py")


def sqlite_like(**settings) -> MCPConnector:
    target = StdioTarget(sys.executable, [str(SERVER)])
    return MCPConnector("sqlite", target, start_timeout_s=30, **settings)


async def test_text_results_stay_text_whatever_they_hold():
    connector = sqlite_like()
    try:
        empty = await connector.call_tool("list_tables", {})
        await connector.call_tool("create_table", {"name": "users"})
        full = await connector.call_tool("list_tables", {})
        json_text = await connector.call_tool("echo", {"text": '{"a": 1}'})
    finally:
        await connector.aclose()
    assert empty.value == "[]"  # JSON, but not decoded: the type does not depend on content
    assert full.value == "[{'name': 'users'}]"
    assert json_text.value == '{"a": 1}'
    assert {type(r.value) for r in (empty, full, json_text)} == {str}


async def test_decode_json_setting_decodes_json_objects_and_arrays_only():
    connector = sqlite_like(decode_json=True)
    try:
        empty = await connector.call_tool("list_tables", {})
        await connector.call_tool("create_table", {"name": "users"})
        full = await connector.call_tool("list_tables", {})
        number = await connector.call_tool("echo", {"text": "42"})
        specs = {spec.name: spec for spec in await connector.list_tools()}
    finally:
        await connector.aclose()
    assert empty.value == []
    assert full.value == "[{'name': 'users'}]"  # not JSON: stays text
    assert number.value == "42"
    assert all(spec.decode_json for spec in specs.values())


async def test_a_declared_output_schema_decodes_json_text_even_unlisted():
    # Never listed by the connector (as when the catalog's tools come from the cache): the SDK's
    # own check finds the schema, and the text-only answer is decoded.
    connector = sqlite_like()
    try:
        counted = await connector.call_tool("count_tables", {})
        echoed = await connector.call_tool("echo", {"text": "[1]"})
    finally:
        await connector.aclose()
    assert counted.value == {"count": 0}
    assert echoed.value == "[1]"


async def test_the_setting_comes_from_the_config(tmp_path):
    entry = f'[servers.sqlite]\ncommand = "{sys.executable}"\nargs = ["{SERVER}"]\n'
    (tmp_path / "plain.toml").write_text(entry)
    (tmp_path / "decoding.toml").write_text(entry + "decode_json = true\n")
    plain = load_config(tmp_path / "plain.toml").servers["sqlite"]
    server = load_config(tmp_path / "decoding.toml").servers["sqlite"]
    assert (plain.decode_json, server.decode_json) == (False, True)
    # Cached definitions carry the setting, so changing it must change the cache key.
    assert plain.fingerprint() != server.fingerprint()
    connector = build_connector("sqlite", server)
    try:
        assert (await connector.call_tool("list_tables", {})).value == []
    finally:
        await connector.aclose()


async def test_stubs_say_which_type_comes_back():
    plain, decoding = sqlite_like(), sqlite_like(decode_json=True)
    try:
        specs = {spec.name: spec for spec in await plain.list_tools()}
        decoded = {spec.name: spec for spec in await decoding.list_tools()}
    finally:
        await plain.aclose()
        await decoding.aclose()

    def flat(source: str) -> str:  # docstrings are wrapped: compare without line breaks
        return " ".join(source.split())

    text_stub = flat(render_tool_module(specs["list_tables"]))
    assert "def list_tables() -> str:" in text_stub
    assert "as a str, never decoded: it may hold JSON (json.loads), a Python literal" in text_stub
    decoding_stub = flat(render_tool_module(decoded["list_tables"]))
    assert "def list_tables() -> Any:" in decoding_stub
    assert "decoded to a dict or list (the server's decode_json setting)" in decoding_stub
    structured_stub = flat(render_tool_module(specs["count_tables"]))
    assert "def count_tables() -> CountTablesResult:" in structured_stub
    assert "Its structured result" in structured_stub


# Answers like mcp-server-sqlite's read_query: rows as a Python repr, a bad query as text.
READ_QUERY_SERVER = """
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOL = types.Tool(
    name="read_query",
    description="Rows of a table.",
    input_schema={"type": "object", "properties": {"table": {"type": "string"}}},
    annotations=types.ToolAnnotations(read_only_hint=True),
)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
    table = (params.arguments or {}).get("table")
    answer = str([{"id": 1, "table": table}]) if table == "users" else (
        f"Database error: no such table: {table}"
    )
    return types.CallToolResult(content=[types.TextContent(type="text", text=answer)])


async def main() -> None:
    server: Server[Any] = Server("sqlite", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


anyio.run(main)
"""


async def test_stubs_say_what_text_results_were_seen_to_hold(tmp_path: Path) -> None:
    from codemode.catalog.catalog import Catalog
    from codemode.config import CodemodeConfig, GatewaySettings
    from codemode.engine import Codemode
    from codemode.sandbox import Limits, SandboxSettings

    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=30), pool_size=1),
        gateway=GatewaySettings(state_dir=tmp_path),
    )
    script = tmp_path / "read_query_server.py"
    script.write_text(READ_QUERY_SERVER)
    connector = MCPConnector("sqlite", StdioTarget(sys.executable, [str(script)]))
    code = (
        "from servers import sqlite\n"
        "print(sqlite.read_query(table='users'))\n"
        "print(sqlite.read_query(table='nope'))\n"
    )
    async with Codemode(config, catalog=Catalog([connector]), semantic=False) as engine:
        result = await engine.execute(code)
        assert result.status == "ok", result.render_text()
        assert "Database error: no such table: nope" in result.stdout  # text, not ToolError
        stub = " ".join((await engine.views()).stubs.tool_source("sqlite", "read_query").split())
    assert "str holding a Python literal list[{id: int, table: str}]" in stub
    assert "(decode with ast.literal_eval)" in stub
    assert "errors come as ordinary text, not ToolError" in stub

"""Results the MCP Python SDK wraps as ``{"result": X}`` (lists and scalars) come back as ``X``,
typed as ``X`` in the stubs. The upstream is a real ``MCPServer`` over stdio."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.mcp import MCPConnector, StdioTarget
from codemode.connectors.mcp_results import sdk_wrapped_schema
from codemode.engine import Codemode
from codemode.sandbox import Limits, SandboxSettings
from codemode.stubs import render_tool_module

pytestmark = pytest.mark.anyio

SERVER = '''
from mcp.server import MCPServer

server = MCPServer("shop")


@server.tool()
def list_customers() -> list[dict[str, str]]:
    """The customers."""
    return [{"name": "Ann"}, {"name": "Bob"}]


@server.tool()
def wait(ms: int) -> str:
    """Wait, then say so."""
    return "done"


@server.tool()
def count() -> int:
    """How many customers."""
    return 2


@server.tool()
def info() -> dict[str, int]:
    """A dict: not wrapped by the SDK."""
    return {"a": 1}


if __name__ == "__main__":
    server.run("stdio")
'''


@pytest.fixture
def shop(tmp_path: Path) -> MCPConnector:
    path = tmp_path / "shop_server.py"
    path.write_text(SERVER)
    return MCPConnector("shop", StdioTarget(sys.executable, [str(path)]), start_timeout_s=30)


async def test_wrapped_lists_and_scalars_come_back_unwrapped(shop: MCPConnector) -> None:
    try:
        # Called before any listing (a catalog read from its cache): still unwrapped.
        rows = await shop.call_tool("list_customers", {})
        waited = await shop.call_tool("wait", {"ms": 1})
        counted = await shop.call_tool("count", {})
        info = await shop.call_tool("info", {})
    finally:
        await shop.aclose()
    assert rows.value == [{"name": "Ann"}, {"name": "Bob"}]
    assert waited.value == "done"
    assert counted.value == 2
    assert info.value == {"a": 1}  # an object result is the tool's own: left as it is


async def test_stubs_type_wrapped_results_as_what_the_tool_returns(shop: MCPConnector) -> None:
    try:
        specs = {spec.name: spec for spec in await shop.list_tools()}
    finally:
        await shop.aclose()

    def returns(name: str) -> str:
        source = render_tool_module(specs[name])
        return next(line for line in source.splitlines() if line.endswith(":") and "-> " in line)

    assert returns("list_customers") == "def list_customers() -> list[dict[str, str]]:"
    assert returns("wait") == ") -> str:"
    assert returns("count") == "def count() -> int:"
    assert "Result" not in render_tool_module(specs["count"])


def test_only_the_sdk_wrapper_shape_is_unwrapped() -> None:
    wrapper = {
        "type": "object",
        "properties": {"result": {"type": "integer", "title": "Result"}},
        "required": ["result"],
        "title": "countOutput",
    }
    assert sdk_wrapped_schema(wrapper) == {"type": "integer"}
    assert sdk_wrapped_schema({**wrapper, "title": "Count"}) is None  # a tool's own object
    assert sdk_wrapped_schema({**wrapper, "required": []}) is None
    two = {**wrapper, "properties": {**wrapper["properties"], "more": {"type": "string"}}}
    assert sdk_wrapped_schema(two) is None


async def test_code_iterates_the_rows_of_a_wrapped_list(shop: MCPConnector) -> None:
    shop.annotations_default = "read_only"  # no approvals in the way
    config = CodemodeConfig(
        servers={}, sandbox=SandboxSettings(limits=Limits(wall_time_s=30), pool_size=1)
    )
    code = (
        "from servers import shop\n"
        "for row in shop.list_customers():\n"
        "    print(row['name'])\n"
        "print(shop.wait(ms=1).upper(), shop.count() + 1)\n"
    )
    async with Codemode(config, catalog=Catalog([shop]), semantic=False) as engine:
        result = await engine.execute(code)
    assert result.status == "ok", result.render_text()
    assert result.stdout == "Ann\nBob\nDONE 3\n"

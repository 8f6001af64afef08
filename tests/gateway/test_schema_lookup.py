"""The gateway tells the SDK each meta-tool's input schema directly: without it the SDK runs
the whole ``tools/list`` handler on every ``tools/call`` to check ``Mcp-Param-*`` headers."""

from __future__ import annotations

import pytest

from codemode.engine import Codemode
from codemode.gateway.meta_tools import mcp_tools
from codemode.gateway.server import build_server

pytestmark = pytest.mark.anyio


async def test_each_listed_tools_schema_is_looked_up_without_listing(bare_engine: Codemode) -> None:
    server = build_server(bare_engine)
    lookup = server.get_tool_input_schema
    assert lookup is not None, "the SDK would run tools/list on every call"
    listed = mcp_tools()
    assert listed
    for tool in listed:
        assert lookup(tool.name) == tool.input_schema
    assert lookup("no_such_tool") is None

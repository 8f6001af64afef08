"""The gateway tells the SDK each meta-tool's input schema directly: without it the SDK runs
the whole ``tools/list`` handler on every ``tools/call`` to check ``Mcp-Param-*`` headers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.engine import Codemode
from codemode.gateway.meta_tools import mcp_tools
from codemode.gateway.server import build_server
from codemode.sandbox.inprocess import InProcessSandboxes

pytestmark = pytest.mark.anyio


@pytest.fixture
async def engine() -> AsyncIterator[Codemode]:
    async with Codemode(
        CodemodeConfig(servers={}),
        catalog=Catalog([]),
        sandboxes=InProcessSandboxes(),
        semantic=False,
    ) as engine:
        yield engine


async def test_each_listed_tools_schema_is_looked_up_without_listing(engine: Codemode) -> None:
    server = build_server(engine)
    lookup = server.get_tool_input_schema
    assert lookup is not None, "the SDK would run tools/list on every call"
    listed = mcp_tools()
    assert listed
    for tool in listed:
        assert lookup(tool.name) == tool.input_schema
    assert lookup("no_such_tool") is None

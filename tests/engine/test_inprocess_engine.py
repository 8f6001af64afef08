"""The engine and the gateway over the in-process sandbox twin (no user namespaces needed).

The same flows as with bubblewrap: tools through the invoker chain, state across executions,
approvals, grants, errors, and the official MCP client against the gateway's server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.gateway.server import build_server
from codemode.policy import PolicySettings
from codemode.sandbox.inprocess import InProcessSandboxes

pytestmark = pytest.mark.anyio

ASK = {"rules": [{"tools": ["shop.place_order"], "action": "ask", "reason": "money"}]}


@pytest.fixture
async def twin(shop: Any) -> AsyncIterator[Codemode]:
    config = CodemodeConfig(servers={}, policy=PolicySettings.from_mapping(ASK, "t"))
    catalog = Catalog([PythonConnector("shop", shop.functions())])
    sandboxes = InProcessSandboxes()
    async with Codemode(config, catalog=catalog, sandboxes=sandboxes, semantic=False) as engine:
        yield engine
    assert all(sandbox.closed for sandbox in sandboxes.opened)


async def test_tools_state_and_search(twin: Codemode) -> None:
    first = await twin.execute("from servers import shop\nitems = shop.list_items()\nprint(items)")
    assert first.status == "ok", first.render_text()
    assert first.stdout == "['apple', 'pear']\n"
    assert first.tool_calls["by_tool"] == {"shop.list_items": {"calls": 1, "failures": 0}}
    again = await twin.execute("print(len(items))", session=first.session)
    assert again.stdout == "2\n"
    answer = await twin.search("place an order", limit=2)
    assert "shop.place_order" in answer.text


async def test_an_approval_pauses_and_resumes_the_same_execution(twin: Codemode, shop) -> None:
    code = "from servers import shop\nprint(shop.place_order(item='pear', quantity=1)['number'])"
    paused = await twin.execute(code)
    assert paused.status == "approval_required"
    assert shop.orders == []
    done = await twin.approve(paused.to_dict()["approval"]["id"], True)
    assert (done.status, done.stdout) == ("ok", "1\n")
    assert len(shop.orders) == 1


async def test_errors_and_unknown_tools_reach_the_code(twin: Codemode) -> None:
    code = (
        "from servers._runtime import call_tool\n"
        "try:\n"
        "    call_tool('shop', 'drop_tables', {})\n"
        "except ToolError as error:\n"
        "    print(error.code)\n"
        "1 / 0\n"
    )
    result = await twin.execute(code)
    assert result.stdout == "tool_not_granted\n"
    assert result.status == "error"
    assert result.error is not None
    assert (result.error["type"], result.error["line"]) == ("ZeroDivisionError", 6)


async def test_the_gateway_over_the_twin_with_the_official_client(twin: Codemode) -> None:
    async with Client(build_server(twin)) as client:
        tools = await client.list_tools()
        assert {tool.name for tool in tools.tools} == {"search", "execute", "approve"}
        result = await client.call_tool(
            "execute", {"code": "from servers import shop\nprint(shop.list_items()[0])"}
        )
    assert result.structured_content is not None
    assert result.structured_content["stdout"] == "apple\n"
    assert result.structured_content["session"].startswith("s_")

"""Awaitable tool calls (``await tool.aio(...)``) through the engine to a real stdio MCP server.

The server proves concurrency without timing: ``meet`` returns only once ``group`` calls are
inside it at the same moment (bounded), so serial calls would fail it. Results and errors keep
the order of the calls; the per-server cap holds; a sync call may run among awaitable ones.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.mcp import MCPConnector, StdioTarget
from codemode.engine import Codemode
from codemode.sandbox import Limits, SandboxSettings

pytestmark = pytest.mark.anyio

SERVER = '''
import asyncio
from mcp.server import MCPServer

server = MCPServer("crm")
inside = 0
peak = 0
everyone = asyncio.Event()


@server.tool()
async def get_lead(lead_id: int) -> str:
    """A lead; lead ids ending in 3 do not exist."""
    global inside, peak
    inside += 1
    peak = max(peak, inside)
    try:
        await asyncio.sleep(0.02)
    finally:
        inside -= 1
    if lead_id % 10 == 3:
        raise ValueError(f"no lead {lead_id}")
    return f"lead-{lead_id}"


@server.tool()
async def meet(group: int) -> str:
    """Returns once `group` calls are inside at the same moment (fails after 10 s)."""
    global inside, peak
    inside += 1
    peak = max(peak, inside)
    if inside >= group:
        everyone.set()
    try:
        await asyncio.wait_for(everyone.wait(), 10)
    finally:
        inside -= 1
    return "met"


@server.tool()
def most_at_once() -> int:
    """The most calls that were inside a tool at the same moment."""
    return peak


if __name__ == "__main__":
    server.run("stdio")
'''

GATHER = """
import asyncio
from servers import crm

results = await asyncio.gather(
    *(crm.get_lead.aio(lead_id=i) for i in range(50)), return_exceptions=True
)
print(" ".join(
    "E" if isinstance(r, ToolError) and r.tool == "crm.get_lead" else r[5:]
    for r in results
))
"""


@pytest.fixture
def server_script(tmp_path: Path) -> Path:
    path = tmp_path / "crm_server.py"
    path.write_text(SERVER)
    return path


@pytest.fixture
def open_engine(server_script: Path) -> Callable[[int], AsyncIterator[Codemode]]:
    @asynccontextmanager
    async def open_(per_server: int) -> AsyncIterator[Codemode]:
        config = CodemodeConfig(
            servers={}, sandbox=SandboxSettings(limits=Limits(wall_time_s=30), pool_size=1)
        )
        target = StdioTarget(sys.executable, [str(server_script)])
        connector = MCPConnector("crm", target, annotations_default="read_only", decode_json=True)
        catalog = Catalog([connector], concurrency={"crm": per_server})
        async with Codemode(config, catalog=catalog, semantic=False) as engine:
            yield engine

    return open_  # type: ignore[return-value]


async def test_gather_keeps_the_order_of_results_and_errors(open_engine) -> None:
    async with open_engine(16) as engine:
        result = await engine.execute(GATHER)
    assert result.status == "ok", result.render_text()
    expected = " ".join("E" if i % 10 == 3 else str(i) for i in range(50))
    assert result.stdout.strip() == expected
    assert result.tool_calls["count"] == 50
    assert result.tool_calls["failures"] == 5


async def test_awaitable_calls_are_in_flight_together_up_to_the_server_cap(open_engine) -> None:
    code = """
import asyncio
from servers import crm
print(await asyncio.gather(*(crm.meet.aio(group=4) for _ in range(4))))
await asyncio.gather(*(crm.get_lead.aio(lead_id=10 * i) for i in range(12)))
print("peak", crm.most_at_once())
"""
    async with open_engine(4) as engine:
        result = await engine.execute(code)
    assert result.status == "ok", result.render_text()
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "['met', 'met', 'met', 'met']"
    assert lines[1] == "peak 4"  # four met at once; the cap of 4 was never passed


async def test_sync_calls_and_imports_among_awaitable_ones(open_engine) -> None:
    code = """
import asyncio
from servers import crm

async def lead_and_neighbour(i):
    mine = crm.get_lead.aio(lead_id=i)
    neighbour = crm.get_lead(lead_id=i + 100)  # a plain call while awaitable ones are out
    return await mine, neighbour

print(await asyncio.gather(*(lead_and_neighbour(i) for i in (1, 2))))
"""
    async with open_engine(8) as engine:
        result = await engine.execute(code)
    assert result.status == "ok", result.render_text()
    assert result.stdout.strip() == ("[('lead-1', 'lead-101'), ('lead-2', 'lead-102')]")


async def test_a_call_left_unawaited_does_not_disturb_the_next_execution(open_engine) -> None:
    async with open_engine(8) as engine:
        first = await engine.execute(
            "import asyncio\nfrom servers import crm\n"
            "async def leave():\n"
            "    task = asyncio.ensure_future(crm.get_lead.aio(lead_id=7))\n"
            "    await asyncio.sleep(0)\n"
            "await leave()\nprint('left')"
        )
        assert first.status == "ok", first.render_text()
        second = await engine.execute(
            "print(crm.get_lead(lead_id=8), await crm.get_lead.aio(lead_id=9))",
            session=first.session,
        )
    assert second.status == "ok", second.render_text()
    assert second.stdout.strip() == "lead-8 lead-9"

"""A small MCP server (our own SDK, over stdio) whose behaviour the tests control."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

FAKE_SERVER = '''
import os, sys, asyncio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

server = MCPServer("fake")

@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b

@server.tool()
def env(name: str) -> str:
    """One variable of the server's environment ('' when unset)."""
    return os.environ.get(name, "")

@server.tool()
def pid() -> int:
    return os.getpid()

@server.tool()
def crash() -> str:
    os._exit(3)

@server.tool()
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"

@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named extra and announce the change."""
    server.add_tool(lambda: "extra!", name="extra", description="added at run time")
    await ctx.notify_tools_changed()
    return "grown"

if __name__ == "__main__":
    print("fake server starting", file=sys.stderr)
    server.run("stdio")
'''


@pytest.fixture(scope="session")
def fake_server_argv(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    path = Path(tmp_path_factory.mktemp("fake")) / "fake_server.py"
    path.write_text(FAKE_SERVER)
    return [sys.executable, str(path)]

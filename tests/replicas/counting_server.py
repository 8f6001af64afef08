"""An MCP server (stdio) whose one side effect appends a line to a file: calls are counted
across every gateway replica that starts its own copy. ``python counting_server.py FILE``."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server import MCPServer

server = MCPServer("orders")
CALLS = Path(sys.argv[1])


@server.tool()
def place_order(item: str) -> str:
    """Place an order (a side effect: one line in the calls file)."""
    with CALLS.open("a", encoding="utf-8") as handle:
        handle.write(item + "\n")
    return f"ordered {item}"


if __name__ == "__main__":
    server.run("stdio")

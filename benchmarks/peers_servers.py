"""The servers `peers.py` runs: a small upstream MCP server, and FastMCP's CodeMode over it.

    python peers_servers.py upstream
    python peers_servers.py fastmcp PORT UPSTREAM_SCRIPT [SPEC.json.gz ...]

``upstream`` (stdio, official SDK): ``ping()``, ``echo(text)`` and ``stamp(text)``. ``fastmcp`` (streamable
HTTP): FastMCP with its experimental ``CodeMode`` transform (search, get_schema, execute on
pydantic-monty) over a proxy of the upstream (tools ``up_ping``, ``up_echo``, ``up_stamp``) and, when given,
one server per OpenAPI spec (``FastMCP.from_openapi``; no request is ever sent).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path


def upstream() -> None:
    from mcp.server import MCPServer

    server = MCPServer("up")

    @server.tool()
    def ping() -> str:
        """Answer pong."""
        return "pong"

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def stamp(text: str) -> str:
        """Return the text with a line put before it."""
        return f"stamped\n{text}"

    server.run("stdio")


def fastmcp(port: int, upstream_script: str, specs: list[str]) -> None:
    import httpx2
    from fastmcp import FastMCP
    from fastmcp.experimental.transforms.code_mode import CodeMode
    from fastmcp.server import create_proxy

    main = FastMCP("peer")
    config = {
        "mcpServers": {"up": {"command": sys.executable, "args": [upstream_script, "upstream"]}}
    }
    main.mount(create_proxy(config), namespace="up")
    for spec in specs:
        with gzip.open(spec, "rt", encoding="utf-8") as handle:
            document = json.load(handle)
        # A base URL nobody listens on: the benchmark searches these tools, never calls them.
        client = httpx2.AsyncClient(base_url="http://127.0.0.1:9")
        name = Path(spec).name.split("-")[0]
        main.mount(FastMCP.from_openapi(document, client=client, name=name), namespace=name)
    main.add_transform(CodeMode())
    main.run(transport="http", host="127.0.0.1", port=port, show_banner=False, log_level="warning")


if __name__ == "__main__":
    if sys.argv[1] == "upstream":
        upstream()
    else:
        fastmcp(int(sys.argv[2]), sys.argv[3], sys.argv[4:])

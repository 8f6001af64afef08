"""The servers `peers.py` runs: a small upstream MCP server, and FastMCP's CodeMode over it.

    python peers_servers.py upstream
    python peers_servers.py fastmcp PORT UPSTREAM_SCRIPT [SPEC.json.gz ...]

``upstream`` (stdio, official SDK): ``ping()``, ``echo(text)``, ``stamp(text)`` and
``contacts(count, seed)``. ``fastmcp`` (streamable HTTP): FastMCP with its experimental
``CodeMode`` transform (search, get_schema, execute on pydantic-monty) over a proxy of the
upstream (tools ``up_ping``, ``up_echo``, ``up_stamp``, ``up_contacts``) and, when given, one
server per OpenAPI spec (``FastMCP.from_openapi``; no request is ever sent).
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

    @server.tool()
    def contacts(count: int, seed: int = 0) -> list[dict[str, object]]:
        """Return ``count`` contact records (a CRM export): id, name, e-mail, phone, city,
        order count and a note; ``seed`` picks which contacts."""
        return contact_records(count, seed)

    server.run("stdio")


def contact_records(count: int, seed: int) -> list[dict[str, object]]:
    """Contacts as a CRM returns them: about 180 bytes of JSON each, two values to hide."""
    import random

    rng = random.Random(seed)
    first = ["Maria", "Kofi", "Aiko", "Lars", "Priya", "Tom", "Ana", "Ivan"]
    last = ["Lopez", "Okafor", "Tanaka", "Berg", "Shah", "Reed", "Silva", "Petrov"]
    base = seed * count
    return [
        {
            "id": f"c{base + number}",
            "name": f"{rng.choice(first)} {rng.choice(last)}",
            "email": f"user{base + number}@example{number % 50}.com",
            "phone": f"+49 30 {rng.randint(1_000_000, 9_999_999)}",
            "city": rng.choice(["Berlin", "Paris", "Oslo"]),
            "orders": rng.randint(0, 50),
            "note": "Prefers e-mail; ordered 3 items on 2024-05-02.",
        }
        for number in range(count)
    ]


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

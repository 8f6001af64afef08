"""Run the gateway: start the engine, then serve MCP over stdio or streamable HTTP."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from codemode.config import CodemodeConfig
from codemode.engine import Codemode
from codemode.gateway.server import build_server

__all__ = ["serve"]

log = logging.getLogger(__name__)
Transport = Literal["stdio", "http"]


async def serve(
    config: CodemodeConfig,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    openapi_specs: Sequence[Path] = (),
) -> None:
    names = ", ".join(config.servers) or "none"
    print(f"codemode: starting tool servers ({names}) and sandboxes...", file=sys.stderr)
    async with Codemode(config, openapi_specs=openapi_specs) as engine:
        failures = engine.catalog.failures
        tools = len(engine.catalog.specs())
        print(
            f"codemode: {tools} tools ready"
            + (f"; unavailable: {', '.join(failures)}" if failures else ""),
            file=sys.stderr,
        )
        server = build_server(engine)
        if transport == "stdio":
            from mcp.server.stdio import stdio_server

            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
            return
        import uvicorn

        app = server.streamable_http_app(host=host)
        print(f"codemode: serving MCP on http://{host}:{port}/mcp", file=sys.stderr)
        uv = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
        await uv.serve()

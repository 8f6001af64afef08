"""Run the gateway: start the engine, then serve MCP over stdio or streamable HTTP."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import anyio

from codemode.config import CodemodeConfig
from codemode.engine import Codemode
from codemode.gateway.server import build_server
from codemode.sdk_compat import uvicorn_server

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
        # SIGTERM and SIGINT end serving gracefully, so the engine stops every sandbox and
        # upstream on the way out (the default action would kill the process first).
        async with anyio.create_task_group() as group:
            if transport == "stdio":
                from mcp.server.stdio import stdio_server

                group.start_soon(_stop_on_signal, group.cancel_scope.cancel)
                async with stdio_server() as (read_stream, write_stream):
                    await server.run(
                        read_stream, write_stream, server.create_initialization_options()
                    )
            else:
                import uvicorn

                app = server.streamable_http_app(host=host)
                print(f"codemode: serving MCP on http://{host}:{port}/mcp", file=sys.stderr)
                # uvicorn would re-raise the signal after its shutdown, killing the process
                # before the engine cleans up: we watch the signals instead.
                uv = uvicorn_server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
                group.start_soon(_stop_on_signal, lambda: setattr(uv, "should_exit", True))
                await uv.serve()
            group.cancel_scope.cancel()


async def _stop_on_signal(stop: Callable[[], object]) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            print("codemode: stopping", file=sys.stderr)
            stop()
            return

"""The codemode MCP server: ``search``, ``execute`` and ``approve``, over stdio or streamable HTTP.

Built on the official SDK's low-level ``Server`` so the tool definitions are exactly the ones in
``meta_tools`` (their token cost is measured) and ``execute`` can return the structured result
and a compact text rendering together.
"""

from __future__ import annotations

import hashlib
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from codemode import __version__
from codemode.engine import Codemode
from codemode.gateway.handlers import Caller, GatewayHandlers
from codemode.gateway.meta_tools import mcp_tools
from codemode.sdk_compat import connection_key

__all__ = ["build_server", "caller_identity", "caller_of"]

INSTRUCTIONS = (
    "Use `search` to find tool APIs, then `execute` Python that imports them "
    "(`from servers import <server>`). Only printed output comes back."
)


def caller_identity(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """Who is calling, where the transport says: a digest of the HTTP credentials."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    credential = headers.get("authorization") or headers.get("x-api-key")
    if not credential:
        return None
    return hashlib.sha256(credential.encode()).hexdigest()[:32]


def caller_of(ctx: ServerRequestContext[Any, Any]) -> Caller:
    version = ctx.protocol_version
    legacy = version.startswith(("2025", "2024"))
    # The only stable key for a 2025-era client: an object living as long as its connection.
    connection = connection_key(ctx)
    return Caller(owner=caller_identity(ctx), connection=connection, legacy=legacy)


def build_server(engine: Codemode) -> Server[Any]:
    tools = mcp_tools()
    handlers = GatewayHandlers(engine)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await handlers.call(params.name, dict(params.arguments or {}), caller_of(ctx))

    return Server(
        "codemode",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )

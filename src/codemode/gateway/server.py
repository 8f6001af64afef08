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
from codemode.engine.progress import Progress
from codemode.gateway.auth import OWNER_SCOPE_KEY
from codemode.gateway.handlers import Caller, GatewayHandlers
from codemode.gateway.meta_tools import mcp_tools
from codemode.sdk_compat import connection_key

__all__ = ["build_server", "caller_identity", "caller_of"]

INSTRUCTIONS = (
    "Use `search` to find tool APIs, then `execute` Python that imports them "
    "(`from servers import <server>`). Only printed output comes back."
)


def caller_identity(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """Who is calling, where the transport says: the owner of the bearer token the HTTP
    gateway checked, else (anonymous HTTP) a digest of whatever credentials came along."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict) and isinstance(scope.get(OWNER_SCOPE_KEY), str):
        return str(scope[OWNER_SCOPE_KEY])
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    credential = headers.get("authorization") or headers.get("x-api-key")
    if not credential:
        return None
    return hashlib.sha256(credential.encode()).hexdigest()[:32]


def caller_of(ctx: ServerRequestContext[Any, Any], *, sole_client: str | None = None) -> Caller:
    """``sole_client`` names the one client a transport can have (stdio)."""
    version = ctx.protocol_version
    legacy = version.startswith(("2025", "2024"))
    # The only stable key for a 2025-era client: an object living as long as its connection.
    connection = connection_key(ctx)
    owner = caller_identity(ctx)
    client = f"owner:{owner}" if owner is not None else sole_client
    wants_progress = ctx.meta is not None and ctx.meta.get("progress_token") is not None
    progress = _progress_to(ctx) if wants_progress else None
    return Caller(owner, connection, legacy, client, progress)


def _progress_to(ctx: ServerRequestContext[Any, Any]) -> Progress:
    async def report(value: float, total: float | None, message: str) -> None:
        await ctx.session.report_progress(value, total, message)

    return report


def build_server(engine: Codemode, *, sole_client: str | None = None) -> Server[Any]:
    """``sole_client``: the name of the only client this server will have (stdio), so its
    handle-less calls share a default session and its sessions count against one quota."""
    tools = mcp_tools()
    handlers = GatewayHandlers(engine)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        caller = caller_of(ctx, sole_client=sole_client)
        return await handlers.call(params.name, dict(params.arguments or {}), caller)

    return Server(
        "codemode",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )

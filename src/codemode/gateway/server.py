"""The codemode MCP server: two tools, ``search`` and ``execute``, over stdio or streamable HTTP.

Built on the official SDK's low-level ``Server`` so the tool definitions are exactly the ones in
``meta_tools`` (their token cost is measured) and ``execute`` can return the structured result
and a compact text rendering together.
"""

from __future__ import annotations

import hashlib
import logging
import weakref
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from codemode import __version__
from codemode.engine import Codemode
from codemode.errors import CodemodeError, UnknownSessionError
from codemode.gateway.meta_tools import mcp_tools
from codemode.sandbox.result import ExecutionResult
from codemode.sdk_compat import connection_key

__all__ = ["build_server", "caller_identity"]

log = logging.getLogger(__name__)

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


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def _argument_error(message: str) -> types.CallToolResult:
    return _text(f"invalid arguments: {message}", error=True)


def build_server(engine: Codemode) -> Server[Any]:
    tools = mcp_tools()
    # 2025-era clients keep one connection per conversation: a call without a handle reuses
    # the session this connection used before. 2026 clients pass the handle back themselves.
    connection_sessions: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def search(arguments: dict[str, Any]) -> types.CallToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return _argument_error("`query` must be a non-empty string, e.g. 'create an issue'")
        detail = arguments.get("detail", "summary")
        limit = arguments.get("limit", 5)
        if not isinstance(detail, str):
            return _argument_error("`detail` must be one of: name, summary, full")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            return _argument_error("`limit` must be a positive integer")
        answer = await engine.search(query, detail=detail, limit=limit)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=answer.text)],
            structured_content={"hits": answer.hits},
        )

    async def execute(
        ctx: ServerRequestContext[Any, Any], arguments: dict[str, Any]
    ) -> types.CallToolResult:
        code = arguments.get("code")
        session = arguments.get("session")
        fresh = arguments.get("fresh", False)
        if not isinstance(code, str):
            return _argument_error("`code` must be a string of Python source")
        if session is not None and not isinstance(session, str):
            return _argument_error("`session` must be the string handle from an earlier result")
        if not isinstance(fresh, bool):
            return _argument_error("`fresh` must be true or false")
        legacy = ctx.protocol_version.startswith("2025") or ctx.protocol_version.startswith("2024")
        # ctx.session is a new proxy per request; the SDK's Connection is what lives as long as
        # the client's connection (the only stable key for a 2025-era client).
        connection = connection_key(ctx)
        implicit = session is None and legacy
        if implicit:
            session = connection_sessions.get(connection)
        owner = caller_identity(ctx)
        try:
            result = await engine.execute(code, session=session, fresh=fresh, owner=owner)
        except UnknownSessionError:
            if not (implicit and session):
                raise
            # The connection's session expired: start a new one rather than fail forever.
            result = await engine.execute(code, fresh=fresh, owner=owner)
        if legacy and result.session:
            connection_sessions[connection] = result.session
        return _execution_result(result)

    def _execution_result(result: ExecutionResult) -> types.CallToolResult:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.render_text())],
            structured_content=result.to_dict(),
            is_error=result.status not in ("ok", "approval_required"),
        )

    async def approve(
        ctx: ServerRequestContext[Any, Any], arguments: dict[str, Any]
    ) -> types.CallToolResult:
        approval, allow = arguments.get("approval"), arguments.get("allow")
        if not isinstance(approval, str) or not isinstance(allow, bool):
            return _argument_error("`approval` (the id from the result) and `allow` (true/false)")
        result = await engine.approve(approval, allow, owner=caller_identity(ctx))
        return _execution_result(result)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        try:
            if params.name == "search":
                return await search(arguments)
            if params.name == "execute":
                return await execute(ctx, arguments)
            if params.name == "approve":
                return await approve(ctx, arguments)
        except CodemodeError as error:
            return _text(str(error), error=True)
        except Exception:
            log.exception("%s failed", params.name)
            return _text(f"{params.name} failed inside codemode; see the gateway's log", error=True)
        return _text(
            f"unknown tool {params.name!r}; the tools are search, execute and approve", error=True
        )

    return Server(
        "codemode",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )

"""The codemode MCP server: ``search``, ``execute`` and ``approve``, over stdio or streamable HTTP.

Built on the official SDK's low-level ``Server`` so the tool definitions are exactly the ones in
``meta_tools`` (their token cost is measured) and ``execute`` can return the structured result
and a compact text rendering together.
"""

from __future__ import annotations

import hashlib
from contextlib import AsyncExitStack
from typing import Any

import anyio
from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from codemode import __version__
from codemode.engine import Codemode
from codemode.engine.progress import Progress
from codemode.errors import CodemodeError
from codemode.gateway.auth import OWNER_SCOPE_KEY
from codemode.gateway.disconnects import Disconnects, cancel_when_gone
from codemode.gateway.elicitation import UserChannel
from codemode.gateway.handlers import Answer, Caller, GatewayHandlers
from codemode.gateway.meta_tools import mcp_tools
from codemode.gateway.web.ledger import TokenLedger
from codemode.gateway.web.links import ApprovalLinks
from codemode.sdk_compat import connection_key

__all__ = ["build_server", "caller_identity", "caller_of"]

INSTRUCTIONS = (
    "Use `search` to find tool APIs, then `execute` Python that imports them "
    "(`from servers import <server>`). Only printed output comes back."
)


# The MCP spec's error code for a resource that cannot be read.
RESOURCE_NOT_FOUND = -32002


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


def caller_of(
    ctx: ServerRequestContext[Any, Any],
    *,
    sole_client: str | None = None,
    call: types.CallToolRequestParams | None = None,
) -> Caller:
    """``sole_client`` names the one client a transport can have (stdio); ``call`` is the
    tool call being answered (its input responses reach the user channel)."""
    version = ctx.protocol_version
    legacy = version.startswith(("2025", "2024"))
    # The only stable key for a 2025-era client: an object living as long as its connection.
    connection = connection_key(ctx)
    owner = caller_identity(ctx)
    client = f"owner:{owner}" if owner is not None else sole_client
    wants_progress = ctx.meta is not None and ctx.meta.get("progress_token") is not None
    progress = _progress_to(ctx) if wants_progress else None
    # The SDK unwinds a connection's exit stack when the connection ends. Over stdio that is
    # the gateway's own end, which keeps its sessions' checkpoints anyway.
    exit_stack = getattr(connection, "exit_stack", None) if legacy and not sole_client else None
    on_close = exit_stack.push_async_callback if isinstance(exit_stack, AsyncExitStack) else None
    user = _user_channel(ctx, call)
    return Caller(owner, connection, legacy, client, progress, on_close, user)


def _user_channel(
    ctx: ServerRequestContext[Any, Any], call: types.CallToolRequestParams | None
) -> UserChannel | None:
    """How to ask the client's user, when the client declared elicitation: over the
    back-channel when the connection has one, else in rounds (2026-07-28)."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return None
    # A bare `elicitation: {}` (2025-06-18) means form mode.
    form = elicitation.form is not None or elicitation.url is None
    url = elicitation.url is not None
    ask = ask_url = None
    if not ctx.session.can_send_request and ctx.protocol_version.startswith(("2025", "2024")):
        # Neither a back-channel nor rounds (InputRequiredResult is 2026-07-28's): no way
        # to ask this client's user.
        return None
    if ctx.session.can_send_request:
        request_id = ctx.request_id
        session = ctx.session

        async def ask(message: str, schema: dict[str, Any]) -> types.ElicitResult:
            return await session.elicit_form(message, schema, related_request_id=request_id)

        async def ask_url(message: str, link: str, elicitation_id: str) -> types.ElicitResult:
            return await session.elicit_url(
                message, link, elicitation_id, related_request_id=request_id
            )

    responses = call.input_responses if call is not None else None
    state = call.request_state if call is not None else None
    return UserChannel(form, url, ask, responses, state, ask_url)


def _progress_to(ctx: ServerRequestContext[Any, Any]) -> Progress:
    async def report(value: float, total: float | None, message: str) -> None:
        await ctx.session.report_progress(value, total, message)

    return report


def _gone_event(
    ctx: ServerRequestContext[Any, Any], disconnects: Disconnects | None
) -> anyio.Event | None:
    headers = getattr(ctx.request, "headers", None)
    if disconnects is None or headers is None:
        return None
    return disconnects.take(headers.get("mcp-session-id"), ctx.request_id)


def _client_gone() -> Answer:
    message = "the client disconnected during the call: it was cancelled"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


# Requests that come before a session's first execute (a client connecting, listing,
# searching) or are one: the sandboxes get ready for a session then
# (``GatewayHandlers.expect_session``). Not a ``ping``: a client's keep-alive would keep an
# idle gateway's pool warm forever.
_ANNOUNCING = frozenset({"initialize", "server/discover", "tools/list", "tools/call"})


def build_server(
    engine: Codemode,
    *,
    sole_client: str | None = None,
    disconnects: Disconnects | None = None,
    links: ApprovalLinks | None = None,
    ledger: TokenLedger | None = None,
) -> Server[Any]:
    """``sole_client``: the name of the only client this server will have (stdio), so its
    sessions count against one quota.
    ``disconnects``: filled by ``DisconnectWatch`` around the HTTP app, so a 2025-era client
    that drops its connection mid-call cancels the call. ``links``: the approval page's (HTTP
    gateways), where ``policy.approvals = "url"`` sends the user; ``ledger``: where the tokens
    of each answer are counted for the operator console."""
    tools = mcp_tools()
    # The SDK checks a call's ``Mcp-Param-*`` headers against its tool's input schema; without
    # this lookup it runs the whole ``tools/list`` handler on every call to find that schema.
    schemas = {tool.name: tool.input_schema for tool in tools}
    handlers = GatewayHandlers(engine, links=links, ledger=ledger)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> Answer:
        caller = caller_of(ctx, sole_client=sole_client, call=params)
        arguments = dict(params.arguments or {})
        gone = _gone_event(ctx, disconnects) if caller.legacy else None
        if gone is None:
            return await handlers.call(params.name, arguments, caller)
        return await cancel_when_gone(
            gone, lambda: handlers.call(params.name, arguments, caller), _client_gone
        )

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return await handlers.resources.list_all(caller_of(ctx).owner)

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        try:
            return await handlers.resources.read(str(params.uri), caller_of(ctx).owner)
        except CodemodeError as error:  # unknown, foreign or unservable: the client is told why
            raise MCPError(RESOURCE_NOT_FOUND, str(error)) from None

    async def announce_sessions(
        ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        # A client's first execute follows its connecting (or its search) by a few round
        # trips: a pool back from idle starts its template now, not when the execute asks.
        if ctx.method in _ANNOUNCING:
            handlers.expect_session()
        return await call_next(ctx)

    server: Server[Any] = Server(
        "codemode",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        get_tool_input_schema=schemas.get,
    )
    server.middleware.append(announce_sessions)
    return server

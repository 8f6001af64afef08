"""Every internal of the MCP SDK and of uvicorn that codemode relies on, in one module.

Nothing else in codemode imports a private SDK module or reaches into a private attribute; it
calls the functions here. ``tests/test_sdk_compat.py`` runs each of them against the installed
versions, so a release that moves one of these internals fails there with a message naming it,
instead of somewhere deep in the gateway or a connector.

What is touched, and why:

- ``mcp.client._transport.TransportStreams`` (types only): the pair of streams a client transport
  yields. The SDK exports the ``Transport`` protocol but not this alias.
- ``ClientSession.validate_tool_result``: the client raises *after* a tool ran when its
  structured content breaks the tool's output schema; a call cannot be repeated safely, so the
  check is wrapped to keep the result (``tolerate_invalid_structured_content``).
- ``ServerSession._connection``: the only object that lives exactly as long as one client's
  connection (``ctx.session`` is a new proxy per request); 2025-era clients key their implicit
  session on it (``connection_key``).
- anyio's ``Process._process._transport``: the event loop's subprocess transport stays open (and
  warns when collected) while a grandchild of an MCP server holds its pipes; the stdio transport
  closes it after stopping the server (``close_subprocess_transport``), and finds its ends of
  the child's pipes there (``subprocess_pipe_fd``), to grow them for large messages.
- ``mcp.client.streamable_http.jsonrpc_message_adapter``: the module-level name the SDK's HTTP
  client transport parses each message with (``validate_json``), up to twenty times slower
  than the parse itself for a large result; ``parse_http_messages_fast`` puts an adapter
  there that reads with the function it is given (``connectors.jsonrpc.parse_jsonrpc``: parse
  first, then validate the parsed value): the same messages, the same errors. It changes
  that one name for the whole process, once.
- The client session's reader (``JSONRPCDispatcher.run``) keeps the last message it read in
  its loop variable until the next one arrives, and hands a response's ``result`` dict to the
  waiting request before it reads again. ``release_dispatched_response`` rebinds a delivered
  response's ``result`` to an empty dict when the next message is asked for (the request
  keeps the dict it was handed): a large result is no longer held twice over while the
  upstream is quiet.
- ``uvicorn.Server.capture_signals``: uvicorn installs its own SIGINT/SIGTERM handlers and
  re-raises the signal after shutdown, killing the process before the engine cleans up
  (``uvicorn_server`` returns a server that leaves signals to its caller).

One HTTP client stack: the SDK uses ``httpx2``, and so does codemode (``mcp_http_client`` here,
the OpenAPI connector); ``httpx`` is not a dependency.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator, Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any

from codemode.errors import IncompatibleDependencyError

if TYPE_CHECKING:
    import httpx2
    import mcp_types
    import uvicorn
    from mcp import Client

    # Re-exported (the alias form) for the connectors' type hints.
    from mcp.client._transport import TransportStreams as TransportStreams  # noqa: PLC0414
    from mcp.server.context import ServerRequestContext

__all__ = [
    "MCP_HTTP_READ_TIMEOUT_S",
    "MCP_HTTP_TIMEOUT_S",
    "close_subprocess_transport",
    "connection_key",
    "mcp_http_client",
    "parse_http_messages_fast",
    "release_dispatched_response",
    "subprocess_pipe_fd",
    "tolerate_invalid_structured_content",
    "uvicorn_server",
]

logger = logging.getLogger(__name__)

# The MCP transports' own defaults: a response stream may stay open for minutes.
MCP_HTTP_TIMEOUT_S = 30.0
MCP_HTTP_READ_TIMEOUT_S = 300.0

_warned: set[str] = set()


def _incompatible(package: str, internal: str, needed_for: str) -> IncompatibleDependencyError:
    """The error for an internal that is gone, naming the package version that lost it."""
    try:
        version = metadata.version(package)
    except metadata.PackageNotFoundError:
        version = "(not installed)"
    return IncompatibleDependencyError(
        f"the installed {package} {version} has no {internal}, which codemode uses {needed_for}",
        fix=f"install the {package} version pinned in codemode's pyproject.toml, "
        "or adapt codemode/sdk_compat.py to the new release",
    )


def mcp_http_client(headers: Mapping[str, str] | None = None) -> httpx2.AsyncClient:
    """An ``httpx2`` client for the SDK's streamable HTTP transport, with the MCP timeouts.

    Enter it as an async context manager (it owns a connection pool).
    """
    import httpx2

    return httpx2.AsyncClient(
        headers=dict(headers or {}),
        timeout=httpx2.Timeout(MCP_HTTP_TIMEOUT_S, read=MCP_HTTP_READ_TIMEOUT_S),
    )


def tolerate_invalid_structured_content(
    client: Client, on_invalid: Callable[[str, str], None]
) -> None:
    """Keep a tool result whose structured content is missing or breaks its output schema.

    The result's ``structured_content`` is dropped (so its text content is used) and
    ``on_invalid(tool, reason)`` is told; without this the SDK raises after the call ran.
    """
    session = client.session
    try:
        strict = session.validate_tool_result
    except AttributeError:
        raise _incompatible(
            "mcp", "ClientSession.validate_tool_result", "to tolerate invalid tool results"
        ) from None

    async def lenient(name: str, result: mcp_types.CallToolResult) -> None:
        try:
            await strict(name, result)
        except RuntimeError as error:
            on_invalid(name, str(error))
            result.structured_content = None

    session.validate_tool_result = lenient  # type: ignore[method-assign]


def connection_key(ctx: ServerRequestContext[Any, Any]) -> object:
    """An object that lives as long as the client's connection (stable across its requests).

    Falls back to the per-request session proxy, with one warning, if the SDK lost the
    attribute: 2025-era clients then get a new session per call instead of keeping theirs.
    """
    try:
        connection: object = ctx.session._connection
    except AttributeError:
        if "connection_key" not in _warned:
            _warned.add("connection_key")
            logger.warning("%s", _incompatible("mcp", "ServerSession._connection", "as a key"))
        return ctx.session
    return connection


def uvicorn_server(config: uvicorn.Config) -> uvicorn.Server:
    """A uvicorn server that installs no signal handlers: its caller stops it (``should_exit``)."""
    import uvicorn

    if "capture_signals" not in vars(uvicorn.Server):
        raise _incompatible("uvicorn", "Server.capture_signals", "to keep its signal handlers out")
    return _signal_free_server_class()(config)


@functools.cache
def _signal_free_server_class() -> type[uvicorn.Server]:
    import uvicorn

    class SignalFreeServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return SignalFreeServer


def subprocess_pipe_fd(process: object, child_fd: int) -> int | None:
    """This process's end of the pipe to an anyio ``Process``'s ``child_fd`` (0: its stdin,
    1: its stdout), or None where it is not known."""
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    get_pipe = getattr(transport, "get_pipe_transport", None)
    if not callable(get_pipe):
        return None
    pipe = getattr(get_pipe(child_fd), "get_extra_info", lambda _name: None)("pipe")
    try:
        return int(pipe.fileno()) if pipe is not None else None
    except (AttributeError, OSError, ValueError):
        return None


def close_subprocess_transport(process: object) -> None:
    """Close the event loop's transport of an anyio ``Process`` (a no-op where there is none)."""
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with contextlib.suppress(PermissionError):  # re-killing a setuid child
            close()


class _ParsedFirst:
    """``jsonrpc_message_adapter`` whose ``validate_json`` is ``parse``."""

    def __init__(self, adapter: Any, parse: Callable[[Any], Any]) -> None:
        self._adapter = adapter
        self._parse = parse

    def validate_json(self, data: Any, **_options: Any) -> Any:
        return self._parse(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._adapter, name)


def parse_http_messages_fast(parse: Callable[[Any], Any]) -> bool:
    """Have the SDK's streamable HTTP client read each message with ``parse``
    (``connectors.jsonrpc.parse_jsonrpc``: parsed, then validated; see the list above).
    Idempotent. False (and a warning, once) where the SDK no longer has the name: its own
    parse then serves, only slower."""
    from mcp.client import streamable_http

    adapter = getattr(streamable_http, "jsonrpc_message_adapter", None)
    if isinstance(adapter, _ParsedFirst):
        return True
    if adapter is None or not callable(getattr(adapter, "validate_json", None)):
        if "parse_http_messages_fast" not in _warned:
            _warned.add("parse_http_messages_fast")
            internal = "mcp.client.streamable_http.jsonrpc_message_adapter"
            logger.warning("%s", _incompatible("mcp", internal, "to parse large results fast"))
        return False
    setattr(streamable_http, "jsonrpc_message_adapter", _ParsedFirst(adapter, parse))  # noqa: B010
    return True


def release_dispatched_response(item: object) -> None:
    """Let a response the session's reader dispatched already (``item``: a ``SessionMessage``
    the transport delivered before the reader asked for the next) let go of its result (see
    the list above); anything else is left as it is."""
    import mcp_types

    message = getattr(item, "message", None)
    if isinstance(message, mcp_types.JSONRPCResponse) and message.result:
        message.result = {}

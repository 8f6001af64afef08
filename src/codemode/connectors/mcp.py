"""MCP servers as a connector: over stdio (a child process) or streamable HTTP (a URL).

One long-lived connection per upstream, owned by a background task (the SDK's ``Client`` is an
async context manager that must be entered and left by the same task). The connection starts on
first use or with ``await connector.start()``; when the upstream dies (end of its stream) the
next call starts it again, with a bounded backoff after repeated failures. Every wait is bounded.
A dead upstream raises ``UpstreamUnavailableError`` naming the server and, for stdio, the tail of
its stderr. ``aclose()`` stops the child: stdin closed, then SIGTERM to its process group, then
SIGKILL (the SDK's shutdown sequence). How results and annotations are read: ``mcp_results``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator
from typing import IO, TYPE_CHECKING, Any

from codemode.connectors.base import BaseConnector, ToolsChangedCallback
from codemode.connectors.mcp_results import tool_result_from_mcp, tool_spec_from_mcp, wrapped_tools
from codemode.connectors.mcp_transport import (
    HTTPTarget,
    StdioTarget,
    child_environment,
    watched_transport,
)
from codemode.connectors.tether import tethered_pid
from codemode.errors import UpstreamUnavailableError
from codemode.tools import AnnotationsDefault, ToolResult, ToolSpec

if TYPE_CHECKING:
    import mcp_types
    from mcp import Client

    from codemode.sdk_compat import TransportStreams

__all__ = [
    "HTTPTarget",
    "MCPConnector",
    "StdioTarget",
    "ToolsChangedCallback",
    "child_environment",
    "tool_result_from_mcp",
    "tool_spec_from_mcp",
]

logger = logging.getLogger(__name__)

_CONNECTION_CLOSED = -32000
_STDERR_TAIL_CHARS = 800
_STDERR_MAX_BYTES = 1 << 20
_MAX_LIST_PAGES = 100
_STOP_TIMEOUT_S = 10.0


class MCPConnector(BaseConnector):
    """An MCP server as a connector.

    ``target`` is a ``StdioTarget``, an ``HTTPTarget`` or, in tests, an in-process SDK server
    object (``mcp.server.MCPServer``). ``annotations_default`` and ``decode_json`` are the
    server's settings (see ``mcp_results``). Uses asyncio tasks: call it from an event loop.
    """

    def __init__(
        self,
        name: str,
        target: StdioTarget | HTTPTarget | Any,
        *,
        call_timeout_s: float = 60.0,
        start_timeout_s: float = 30.0,
        max_backoff_s: float = 30.0,
        annotations_default: AnnotationsDefault = "mcp",
        decode_json: bool = False,
    ) -> None:
        self.name = name
        self.target = target
        self.call_timeout_s = call_timeout_s
        self.start_timeout_s = start_timeout_s
        self.max_backoff_s = max_backoff_s
        self.annotations_default: AnnotationsDefault = annotations_default
        self.decode_json = decode_json
        self._callbacks: list[ToolsChangedCallback] = []
        # Tools known to declare an output schema: their JSON text results are decoded.
        self._structured: set[str] = set()
        # Tools whose results the SDK wraps as {"result": X}: their value is X.
        self._wrapped: set[str] = set()
        self._listed = False  # whether _wrapped is known (a catalog from cache never listed)
        self._lenient: set[str] = set()  # tools already reported for missing structured content
        self._connection: _Connection | None = None
        self._lock = asyncio.Lock()
        self._failures = 0
        self._last_failure = 0.0
        self._last_error = ""
        self._closed = False
        self.starts = 0  # how many connections were opened (restarts included)

    # --- the connector seam -----------------------------------------------------------------

    async def list_tools(self) -> list[ToolSpec]:
        connection = await self._ensure_started()
        specs: list[ToolSpec] = []
        wrapped: set[str] = set()
        cursor: str | None = None
        try:
            for _ in range(_MAX_LIST_PAGES):
                async with asyncio.timeout(self.call_timeout_s):
                    page = await connection.client.list_tools(cursor=cursor)
                specs.extend(self._spec(tool) for tool in page.tools)
                wrapped.update(wrapped_tools(page.tools))
                cursor = page.next_cursor
                if cursor is None:
                    break
        except TimeoutError:
            raise UpstreamUnavailableError(
                f"MCP server {self.name!r} did not list its tools within {self.call_timeout_s:g} s",
                fix="check that the server is healthy, or raise its timeout_s in the config",
            ) from None
        except Exception as error:
            raise self._unavailable(connection, "while listing its tools", error) from error
        self._failures = 0
        self._structured = {spec.name for spec in specs if spec.output_schema is not None}
        self._wrapped, self._listed = wrapped, True
        return specs

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        from mcp import MCPError

        if not self._listed:
            # Which tools the SDK wraps is in their definitions: read them once.
            with contextlib.suppress(UpstreamUnavailableError):
                await self.list_tools()
        connection = await self._ensure_started()
        try:
            async with asyncio.timeout(self.call_timeout_s):
                result = await connection.client.call_tool(tool, arguments)
        except TimeoutError:
            raise UpstreamUnavailableError(
                f"{self.name}.{tool} did not answer within {self.call_timeout_s:g} s",
                fix="retry with a smaller request, or raise the server's timeout_s in the config",
            ) from None
        except MCPError as error:
            if error.code != _CONNECTION_CLOSED and not connection.lost.is_set():
                # The server answered with a protocol error (unknown tool, bad arguments...):
                # the tool's failure to report, not the server's.
                return ToolResult(value=None, is_error=True, error_message=error.message)
            raise self._unavailable(connection, f"during a call to {tool!r}", error) from error
        except (OSError, ConnectionError) as error:
            raise self._unavailable(connection, f"during a call to {tool!r}", error) from error
        except Exception as error:
            if connection.lost.is_set():
                raise self._unavailable(connection, f"during a call to {tool!r}", error) from error
            # HTTP errors, malformed results: the upstream failed this call; keep the connection.
            logger.warning("call %s.%s failed: %r", self.name, tool, error)
            raise UpstreamUnavailableError(
                f"MCP server {self.name!r} failed a call to {tool!r} "
                f"({type(error).__name__}: {error})",
                fix="retry; if it keeps failing, check the server's logs",
            ) from error
        self._failures = 0
        decode = self.decode_json or tool in self._structured
        return tool_result_from_mcp(result, decode_json=decode, unwrap=tool in self._wrapped)

    async def aclose(self) -> None:
        self._closed = True
        async with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            await connection.stop()

    async def start(self) -> None:
        """Connect now rather than at first use. Raises ``UpstreamUnavailableError``."""
        await self._ensure_started()

    def on_tools_changed(self, callback: ToolsChangedCallback) -> None:
        """``callback(name)`` runs when the server announces ``tools/list_changed``."""
        self._callbacks.append(callback)

    # --- life cycle ---------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        connection = self._connection
        return connection is not None and connection.ready and not connection.lost.is_set()

    @property
    def pid(self) -> int | None:
        """The stdio child's process id while connected (for diagnostics and tests)."""
        connection = self._connection
        return connection.find_pid() if connection is not None else None

    @property
    def protocol_version(self) -> str | None:
        connection = self._connection
        if connection is None or not connection.ready:
            return None
        return connection.client.protocol_version

    async def _ensure_started(self) -> _Connection:
        connection = self._connection
        if connection is not None and connection.ready and not connection.lost.is_set():
            return connection
        async with self._lock:
            if self._closed:
                raise UpstreamUnavailableError(
                    f"MCP server {self.name!r} was shut down",
                    fix="open a new catalog or connector",
                )
            connection = self._connection
            if connection is not None and connection.ready and not connection.lost.is_set():
                return connection
            if connection is not None:
                self._connection = None
                self._record_failure(connection.describe_loss())
                await connection.stop()
            wait = self._backoff_remaining()
            if wait > 0:
                raise UpstreamUnavailableError(
                    f"MCP server {self.name!r} is down ({self._last_error}); "
                    f"next restart attempt in {wait:.1f} s",
                    fix="check the server's command and logs; it is restarted automatically",
                )
            connection = _Connection(self)
            self.starts += 1
            try:
                await connection.open(self.start_timeout_s)
            except BaseException as error:
                message = connection.describe_start_failure(error)
                await connection.stop()
                self._record_failure(message)
                if isinstance(error, asyncio.CancelledError):
                    raise
                raise UpstreamUnavailableError(
                    f"MCP server {self.name!r} could not start: {message}",
                    fix=f"check that `{_describe(self.target)}` runs and speaks MCP",
                ) from None
            self._connection = connection
            return connection

    def _record_failure(self, message: str) -> None:
        self._failures += 1
        self._last_failure = time.monotonic()
        self._last_error = message

    def _backoff_remaining(self) -> float:
        if self._failures < 2:
            return 0.0
        delay = min(0.25 * 2.0 ** (self._failures - 2), self.max_backoff_s)
        return max(0.0, self._last_failure + delay - time.monotonic())

    def _unavailable(
        self, connection: _Connection, when: str, error: BaseException
    ) -> UpstreamUnavailableError:
        connection.lost.set()
        detail = connection.stderr_tail()
        suffix = f"; its stderr ends with: {detail}" if detail else ""
        return UpstreamUnavailableError(
            f"MCP server {self.name!r} failed {when} ({type(error).__name__}: {error}){suffix}",
            fix="retry: the server is restarted on the next call",
        )

    def _spec(self, tool: mcp_types.Tool) -> ToolSpec:
        return tool_spec_from_mcp(
            self.name,
            tool,
            annotations_default=self.annotations_default,
            decode_json=self.decode_json,
        )

    def _output_schema_broken(self, tool: str, reason: str) -> None:
        """The SDK found a result without valid structured content for a tool with a schema."""
        level = logging.DEBUG if tool in self._lenient else logging.WARNING
        self._lenient.add(tool)
        logger.log(level, "%s.%s: %s; using the text content instead", self.name, tool, reason)
        self._structured.add(tool)

    async def _tools_changed(self) -> None:
        for callback in list(self._callbacks):
            try:
                outcome = callback(self.name)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                logger.exception("tools-changed callback for %r failed", self.name)


def _describe(target: object) -> str:
    describe = getattr(target, "describe", None)
    return str(describe()) if callable(describe) else type(target).__name__


class _Connection:
    """One live session with the upstream, owned by its own task."""

    def __init__(self, owner: MCPConnector) -> None:
        self.owner = owner
        self.lost = asyncio.Event()
        self.ready = False
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._client: Client | None = None
        self._stderr: IO[str] | None = None
        self._pid: int | None = None
        if isinstance(owner.target, StdioTarget):
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115

    @property
    def client(self) -> Client:
        assert self._client is not None
        return self._client

    async def open(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        started: asyncio.Future[None] = loop.create_future()
        self._task = asyncio.create_task(self._run(started), name=f"mcp:{self.owner.name}")
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(started)
        except TimeoutError:
            raise TimeoutError(f"no answer to the MCP handshake within {timeout_s:g} s") from None
        self.ready = True

    async def stop(self) -> None:
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            try:
                async with asyncio.timeout(_STOP_TIMEOUT_S):
                    await asyncio.shield(task)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(task, 2.0)
            except Exception:  # noqa: BLE001 - shutting down; logged only
                logger.debug("MCP connection task for %r ended with an error", self.owner.name)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    async def _run(self, started: asyncio.Future[None]) -> None:
        from mcp import Client
        from mcp.types import Implementation

        from codemode.sdk_compat import tolerate_invalid_structured_content

        server: Any = self.owner.target
        if _is_remote(server):
            server = self._transport()
        try:
            async with Client(
                server,
                cache=None,
                message_handler=self._on_message,
                client_info=Implementation(name="codemode", version=_version()),
            ) as client:
                tolerate_invalid_structured_content(client, self.owner._output_schema_broken)
                self._client = client
                if not started.done():
                    started.set_result(None)
                async with _listening(client, self.owner) as _:
                    await _first_of(self._stop, self.lost)
        except BaseException as error:
            if not started.done():
                if isinstance(error, asyncio.CancelledError):
                    started.cancel()
                else:
                    started.set_exception(error)
            elif not self._stop.is_set():
                logger.warning("MCP server %r connection ended: %r", self.owner.name, error)
            if isinstance(error, asyncio.CancelledError):
                raise
        finally:
            self.lost.set()

    def _transport(self) -> contextlib.AbstractAsyncContextManager[TransportStreams]:
        return watched_transport(self.owner.target, self._stderr, self.lost)

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            await self.owner._tools_changed()

    # --- diagnostics --------------------------------------------------------------------------

    def stderr_tail(self) -> str:
        handle = self._stderr
        if handle is None:
            return ""
        try:
            size = os.fstat(handle.fileno()).st_size
            with open(os.dup(handle.fileno()), "rb") as raw:  # noqa: PTH123
                raw.seek(max(0, size - 4 * _STDERR_TAIL_CHARS))
                text = raw.read().decode("utf-8", "replace")
            if size > _STDERR_MAX_BYTES:
                handle.truncate(0)
        except OSError:
            return ""
        return " ".join(text.split())[-_STDERR_TAIL_CHARS:]

    def describe_loss(self) -> str:
        tail = self.stderr_tail()
        return "the server exited" + (f"; stderr: {tail}" if tail else "")

    def describe_start_failure(self, error: BaseException) -> str:
        text = _error_text(error)
        tail = self.stderr_tail()
        return text + (f"; its stderr ends with: {tail}" if tail else "")

    def find_pid(self) -> int | None:
        """The stdio server's process id (Linux /proc): the tether's child, both writing
        their stderr to our capture file."""
        if self._pid is not None or self._stderr is None or self.lost.is_set():
            return self._pid if not self.lost.is_set() else None
        try:
            ours = os.fstat(self._stderr.fileno())
        except (OSError, ValueError):
            return None
        self._pid = tethered_pid((ours.st_dev, ours.st_ino))
        return self._pid


def _is_remote(target: object) -> bool:
    return isinstance(target, StdioTarget | HTTPTarget)


def _version() -> str:
    from codemode import __version__

    return __version__


def _error_text(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_error_text(inner) for inner in error.exceptions)
    if isinstance(error, FileNotFoundError):
        return f"command not found ({error.filename or error})"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


async def _first_of(*events: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


@contextlib.asynccontextmanager
async def _listening(client: Client, owner: MCPConnector) -> AsyncIterator[None]:
    """On a 2026-07-28 connection, list changes arrive on a `subscriptions/listen` stream."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    capability = client.server_capabilities.tools
    wanted = client.protocol_version in MODERN_PROTOCOL_VERSIONS and bool(
        capability is not None and capability.list_changed
    )
    if not wanted:
        yield
        return

    async def listen() -> None:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    await owner._tools_changed()
        except Exception as error:  # noqa: BLE001 - a listener must not kill the loop
            logger.debug("tools/list_changed listener for %r ended: %r", owner.name, error)

    task = asyncio.create_task(listen(), name=f"mcp-listen:{owner.name}")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 2.0)

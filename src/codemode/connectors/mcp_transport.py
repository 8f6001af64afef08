"""Where an MCP server lives (a child process or a URL) and the SDK transport that reaches it.

The transport's read stream is watched: its end means the upstream is gone, which sets the
connection's ``lost`` event so the next call starts the server again.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from codemode.connectors.shell_tether import tethered_argv

if TYPE_CHECKING:
    from codemode.sdk_compat import TransportStreams

__all__ = [
    "ENV_ALLOWLIST",
    "MAX_SSE_EVENT_BYTES",
    "HTTPTarget",
    "StdioTarget",
    "child_environment",
    "watched_transport",
]

# Host variables a child may see; everything else it gets from its own `env` config.
#: The largest message an MCP server may send over streamable HTTP as one server-sent event:
#: the largest frame the sandbox bridge takes (``bridge.frames``). The SDK's own default, 1 MiB,
#: failed every tool result beyond it ("Server-sent event exceeded the 1048576 byte limit"),
#: which the same server returns over stdio.
MAX_SSE_EVENT_BYTES = 64 << 20

ENV_ALLOWLIST = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "SYSTEMROOT",
)


@dataclass(frozen=True, slots=True)
class StdioTarget:
    """An MCP server launched as a child process speaking MCP on stdin/stdout."""

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None

    def describe(self) -> str:
        return " ".join([self.command, *self.args])


@dataclass(frozen=True, slots=True)
class HTTPTarget:
    """An MCP server reached over streamable HTTP."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return self.url


def child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed part of our environment plus the server's configured variables."""
    env = {key: os.environ[key] for key in ENV_ALLOWLIST if key in os.environ}
    env.update(extra)
    return env


def _check_command(target: StdioTarget, env: Mapping[str, str]) -> None:
    """``FileNotFoundError`` (or ``PermissionError``) when the server's command cannot be
    run, as starting it directly would raise (the tether, started instead, would only exit)."""
    command = target.command
    if os.sep in command:
        path = Path(target.cwd or "") / command
        if path.is_file() and not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command)
        found = path.is_file()
    else:
        found = shutil.which(command, path=env.get("PATH", os.environ.get("PATH"))) is not None
    if not found:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)


@contextlib.asynccontextmanager
async def watched_transport(
    target: StdioTarget | HTTPTarget, stderr: IO[str] | None, lost: asyncio.Event
) -> AsyncIterator[TransportStreams]:
    """The transport (codemode's own for stdio, the SDK's for HTTP), with its read stream
    watched so the end of it sets ``lost``."""
    from mcp.client.streamable_http import streamable_http_client

    from codemode.connectors.jsonrpc import parse_jsonrpc
    from codemode.connectors.stdio_transport import stdio_transport
    from codemode.sdk_compat import mcp_http_client, parse_http_messages_fast

    try:
        if isinstance(target, StdioTarget):
            env = child_environment(target.env)
            _check_command(target, env)
            # Tethered: the server (and its process group) never outlives this gateway.
            tether, *argv = tethered_argv(target.command, list(target.args))
            async with stdio_transport(
                tether, argv, env=env, cwd=target.cwd, errlog=stderr or sys.stderr
            ) as (read, write):
                yield _WatchedReadStream(read, lost), write
        else:
            parse_http_messages_fast(parse_jsonrpc)
            async with (
                mcp_http_client(target.headers) as http,
                streamable_http_client(
                    target.url, http_client=http, max_sse_event_size=MAX_SSE_EVENT_BYTES
                ) as (read, write),
            ):
                yield _WatchedReadStream(read, lost), write
    finally:
        lost.set()


class _WatchedReadStream:
    """Delegates to the transport's read stream; its end means the upstream is gone. Each
    response it delivered lets go of its result when the next message is asked for
    (``sdk_compat.release_dispatched_response``): the session's reader keeps the last message
    until another arrives, a large result twice over for as long as the upstream is quiet."""

    def __init__(self, inner: Any, lost: asyncio.Event) -> None:
        self._inner = inner
        self._lost = lost
        self._last: object = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        import anyio

        from codemode.sdk_compat import release_dispatched_response

        last, self._last = self._last, None
        release_dispatched_response(last)
        try:
            self._last = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._lost.set()
            raise
        return self._last

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

"""A 2025-era streamable HTTP client that goes away mid-call cancels that call.

Over the 2026 transport each request is one HTTP exchange, and the SDK cancels the handler when
the client disconnects. Over the 2025 one a request runs in the protocol session, not in the
HTTP request that carried it: a client that drops the connection without sending
``notifications/cancelled`` (a killed process, a closed laptop) would leave its ``execute``
running. ``DisconnectWatch`` (an ASGI wrapper) marks a request whose connection closed before its
response ended; the tool handler runs the call under ``cancel_when_gone``, which cancels it
exactly as a client's cancel does (the code is stopped, no tool call starts after it, the
session's next result says what ran).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

__all__ = ["DisconnectWatch", "Disconnects", "cancel_when_gone"]

_T = TypeVar("_T")
SESSION_HEADER = b"mcp-session-id"
# Requests whose connection closed before their handler looked: kept this many, oldest dropped.
_MAX_GONE = 1024


def request_key(session: str, request_id: object) -> str:
    return f"{session}\0{json.dumps(request_id)}"


class Disconnects:
    """Requests being answered over 2025-era HTTP, each with an event set if its client left."""

    def __init__(self) -> None:
        self._events: OrderedDict[str, anyio.Event] = OrderedDict()

    def watch(self, key: str) -> anyio.Event:
        event = self._events[key] = anyio.Event()
        while len(self._events) > _MAX_GONE:
            self._events.popitem(last=False)
        return event

    def take(self, session: str | None, request_id: object) -> anyio.Event | None:
        """The event of this request (for its handler), no longer kept here."""
        if session is None:
            return None
        return self._events.pop(request_key(session, request_id), None)

    def settled(self, key: str, event: anyio.Event) -> None:
        """The HTTP exchange ended; a request whose client left stays for its handler (which
        may not have looked yet), bounded by ``_MAX_GONE``."""
        if not event.is_set() and self._events.get(key) is event:
            del self._events[key]


class DisconnectWatch:
    """ASGI wrapper: a POSTed request of a 2025-era session is watched for its client leaving."""

    def __init__(self, app: Any, disconnects: Disconnects) -> None:
        self.app = app
        self.disconnects = disconnects

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or ())
        session = headers.get(SESSION_HEADER)
        if scope.get("type") != "http" or scope.get("method") != "POST" or not session:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        key = _key_of(session.decode("latin-1"), body)
        event = self.disconnects.watch(key) if key is not None else None
        replayed = False

        async def watched_receive() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            message = await receive()
            # Set also after a response that ended: its handler is done and no longer waits.
            if message["type"] == "http.disconnect" and event is not None:
                event.set()
            return message

        try:
            await self.app(scope, watched_receive, send)
        finally:
            if key is not None and event is not None:
                self.disconnects.settled(key, event)


def _key_of(session: str, body: bytes) -> str | None:
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(decoded, dict) or decoded.get("method") != "tools/call":
        return None
    request_id = decoded.get("id")
    return None if request_id is None else request_key(session, request_id)


async def cancel_when_gone(
    gone: anyio.Event, work: Callable[[], Awaitable[_T]], gone_result: Callable[[], _T]
) -> _T:
    """``work()``, cancelled when ``gone`` is set; then ``gone_result()`` (sent to nobody).

    What ``work()`` raises leaves as it was raised: inside the task group it would reach the
    SDK wrapped in an ``ExceptionGroup``, and an ``MCPError`` (an unknown tool's -32602) would
    turn into JSON-RPC error code 0 and a traceback in the log."""
    results: list[_T] = []
    failures: list[Exception] = []
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            await gone.wait()
            group.cancel_scope.cancel()

        group.start_soon(watch)
        try:
            results.append(await work())
        except Exception as error:  # noqa: BLE001 - re-raised below, outside the group
            failures.append(error)
        group.cancel_scope.cancel()
    if failures:
        raise failures[0]
    return results[0] if results else gone_result()

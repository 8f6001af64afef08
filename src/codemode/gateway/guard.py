"""Malformed JSON-RPC envelopes get -32600 (Invalid Request) and a short message.

The SDK answers a JSON body that is not a JSON-RPC message with -32602 and a pydantic dump
over 2025-era HTTP, and says nothing at all over stdio. Until that is fixed upstream, these
guards answer first: ``EnvelopeGuard`` wraps the HTTP app, ``guard_stdio`` the stdio streams.
Parse errors (-32700) and well-formed requests with bad params (-32602) are left to the SDK.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["EnvelopeGuard", "envelope_problem", "guard_stdio"]

INVALID_REQUEST_MESSAGE = "Invalid Request"
# Bodies larger than this are left to the SDK's own size limit.
_MAX_INSPECTED_BYTES = 4 * 1024 * 1024


def envelope_problem(decoded: Any) -> str | None:
    """Why ``decoded`` (parsed JSON) is not a JSON-RPC 2.0 message; None when it is one."""
    if isinstance(decoded, list):
        return "batches are not supported: send one JSON-RPC object per request"
    if not isinstance(decoded, dict):
        return "the body must be a JSON-RPC 2.0 object"
    try:
        types.jsonrpc_message_adapter.validate_python(decoded, by_name=False)
    except ValidationError:
        pass
    else:
        return None
    if decoded.get("jsonrpc") != "2.0":
        return 'the object needs "jsonrpc": "2.0"'
    if "method" in decoded and not isinstance(decoded["method"], str):
        return '"method" must be a string'
    if "id" in decoded and not _valid_id(decoded["id"]):
        return '"id" must be a string or an integer'
    if "params" in decoded and not isinstance(decoded["params"], dict):
        return '"params" must be an object'
    return "not a JSON-RPC 2.0 request, notification or response"


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _error_body(decoded: Any, problem: str) -> dict[str, Any]:
    request_id = decoded.get("id") if isinstance(decoded, dict) else None
    return {
        "jsonrpc": "2.0",
        "id": request_id if _valid_id(request_id) else None,
        "error": {
            "code": types.INVALID_REQUEST,
            "message": f"{INVALID_REQUEST_MESSAGE}: {problem}",
        },
    }


class EnvelopeGuard:
    """ASGI wrapper: a POSTed JSON body that is not a JSON-RPC message gets -32600."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more and size <= _MAX_INSPECTED_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay(message, receive), send)
                return
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            more = bool(message.get("more_body"))
        body = b"".join(chunks)
        problem = None
        if not more:
            try:
                decoded = json.loads(body)
            except (ValueError, RecursionError):
                decoded = problem = None  # a parse error: the SDK answers -32700
            else:
                problem = envelope_problem(decoded)
        if problem is not None:
            await _respond(send, _error_body(decoded, problem))
            return
        first = {"type": "http.request", "body": body, "more_body": more}
        await self.app(scope, _replay(first, receive), send)


def _replay(first: dict[str, Any], receive: Any) -> Any:
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return first
        return await receive()

    return replay


async def _respond(send: Any, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


@asynccontextmanager
async def guard_stdio(
    read_stream: Any, write_stream: Any
) -> AsyncIterator[MemoryObjectReceiveStream[SessionMessage | Exception]]:
    """The stdio read stream, minus lines that are not JSON-RPC messages: each of those is
    answered with -32700 (not JSON) or -32600 (not a JSON-RPC message) instead."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def pump() -> None:
        async with send:
            async for item in read_stream:
                if isinstance(item, Exception):
                    await write_stream.send(SessionMessage(_stdio_error(item)))
                    continue
                await send.send(item)

    async with anyio.create_task_group() as group:
        group.start_soon(pump)
        try:
            yield receive
        finally:
            group.cancel_scope.cancel()


def _stdio_error(error: Exception) -> types.JSONRPCError:
    kinds = {e.get("type") for e in error.errors()} if isinstance(error, ValidationError) else set()
    if "json_invalid" in kinds or not isinstance(error, ValidationError):
        data = types.ErrorData(code=types.PARSE_ERROR, message="Parse error: a line is not JSON")
    else:
        message = f"{INVALID_REQUEST_MESSAGE}: not a JSON-RPC 2.0 request, notification or response"
        data = types.ErrorData(code=types.INVALID_REQUEST, message=message)
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=data)

"""New MCP clients arriving at once, the way clients arrive: connect, initialize, first execute.

A thin streamable-HTTP client (httpx2, the MCP SDK's own HTTP client; JSON-RPC by hand, protocol
2025-11-25) so that the clients' own work weighs little beside the server's: the official client
in one process spends tens of milliseconds of CPU per connection, and 20 of them at once measure
the client as much as the server. Each client opens its own connection (no shared pool),
initializes, sends ``notifications/initialized`` and runs a first ``execute``; each phase is
timed per client from the common start.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2

PROTOCOL = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
# One TLS context for every client: httpx2 builds one per client otherwise (tens of ms of CPU
# each), though the URLs here are plain http.
_TLS = ssl.create_default_context()


@dataclass
class Arrival:
    """One client's times from the common start, in ms: connected and initialized, the first
    execute answered."""

    initialized_ms: float
    executed_ms: float


def _answer(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC answer of a POST, sent as JSON or as the data of an SSE event."""
    response.raise_for_status()
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message: dict[str, Any] = json.loads(line[5:])
                if "id" in message:
                    return message
        raise RuntimeError(f"no answer in the event stream: {response.text[:500]}")
    answer: dict[str, Any] = response.json()
    return answer


async def arrive(
    url: str, code: str, started: float, answered: Callable[[Arrival], None], done: anyio.Event
) -> None:
    """Connect, initialize and run ``code`` once; ``answered`` hears the times from
    ``started`` (perf_counter). The session ends once ``done`` is set."""
    headers = {"accept": ACCEPT, "content-type": "application/json"}
    async with httpx2.AsyncClient(timeout=120, headers=headers, verify=_TLS) as http:
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "burst", "version": "1"},
            },
        }
        response = await http.post(url, json=hello)
        init = _answer(response)
        if "error" in init:
            raise RuntimeError(f"initialize failed: {init['error']}")
        session = response.headers.get("mcp-session-id")
        if session:
            http.headers["mcp-session-id"] = session
        http.headers["mcp-protocol-version"] = init["result"].get("protocolVersion", PROTOCOL)
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        (await http.post(url, json=note)).raise_for_status()
        initialized = (time.perf_counter() - started) * 1000
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "execute", "arguments": {"code": code}},
        }
        result = _answer(await http.post(url, json=call))
        if "error" in result or result["result"].get("isError"):
            raise RuntimeError(f"execute failed: {json.dumps(result)[:2000]}")
        answered(Arrival(initialized, (time.perf_counter() - started) * 1000))
        # End the session as a client that is done would, once every client has its answer
        # (ending one starts work on the server: it must not slow the others' first execute).
        await done.wait()
        if session:
            await http.delete(url)


async def burst(url: str, code: str, clients: int) -> tuple[list[Arrival], float]:
    """``clients`` arrivals started together: each one's times, and the wall time in ms until
    the last first execute answered."""
    arrivals: list[Arrival] = []
    go, done = anyio.Event(), anyio.Event()
    started = 0.0
    wall = 0.0

    def answered(arrival: Arrival) -> None:
        nonlocal wall
        arrivals.append(arrival)
        if len(arrivals) == clients:
            wall = arrival.executed_ms
            done.set()

    async def one() -> None:
        await go.wait()
        await arrive(url, code, started, answered, done)

    with anyio.fail_after(300):
        async with anyio.create_task_group() as group:
            for _ in range(clients):
                group.start_soon(one)
            await anyio.sleep(0)
            started = time.perf_counter()
            go.set()
    return arrivals, wall

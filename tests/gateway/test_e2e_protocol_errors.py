"""Protocol errors reach every client with their JSON-RPC code, whatever its era and transport.

Finding: over streamable HTTP a 2025-era client calling an unknown tool got error code 0
("unhandled errors in a TaskGroup") and the gateway logged a traceback: the disconnect watcher
wrapped the handler's ``MCPError`` in an ``ExceptionGroup``. stdio and 2026 clients got -32602.
Each error path runs here under 2025 HTTP, 2026 HTTP and stdio (both eras), through the
official MCP client, plus a raw 2025-era request for a server-side validation failure.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import MCPError

pytestmark = [pytest.mark.anyio]

WAIT_S = 60
UNKNOWN_TOOL = -32602  # as the MCP spec shows for an unknown tool
RESOURCE_NOT_FOUND = -32002
# (transport, client mode): the official client's 2025 handshake or its 2026 protocol.
CLIENTS = [("http", "legacy"), ("http", "auto"), ("stdio", "legacy"), ("stdio", "auto")]


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory, harness: Any) -> Path:
    root = tmp_path_factory.mktemp("errors")
    return harness.write_config(root, {}, pool_size=0)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
async def http(config: Path, harness: Any) -> AsyncIterator[Any]:
    gateway = harness.HTTPGateway(config, config.parent / "gateway.log").start()
    try:
        yield gateway
    finally:
        left = gateway.stop()
    assert not left, f"the gateway left processes behind: {sorted(left)}"


def _client(transport: str, mode: str, config: Path, http: Any, harness: Any) -> Any:
    if transport == "http":
        target = harness.http_target(http.url, harness.bearer(harness.MAIN))
    else:
        target = harness.stdio_target(config)
    return harness.client_for(target, mode=mode)


@pytest.mark.parametrize(("transport", "mode"), CLIENTS)
async def test_an_unknown_tool_is_invalid_params(
    transport: str, mode: str, config: Path, http: Any, harness: Any
) -> None:
    async with _client(transport, mode, config, http, harness) as client:
        with anyio.fail_after(WAIT_S), pytest.raises(MCPError) as raised:
            await client.call_tool("no_such_tool", {"x": 1})
    assert raised.value.code == UNKNOWN_TOOL, raised.value
    assert "Unknown tool: 'no_such_tool'" in raised.value.message
    assert "search, execute and approve" in raised.value.message
    if transport == "http":
        assert "TaskGroup" not in http.log() and "Traceback" not in http.log(), http.log()


@pytest.mark.parametrize(("transport", "mode"), CLIENTS)
async def test_an_unknown_resource_is_resource_not_found(
    transport: str, mode: str, config: Path, http: Any, harness: Any
) -> None:
    async with _client(transport, mode, config, http, harness) as client:
        with anyio.fail_after(WAIT_S), pytest.raises(MCPError) as raised:
            await client.read_resource("codemode://session/s_nothing/file/x.txt")
    assert raised.value.code == RESOURCE_NOT_FOUND, raised.value


@pytest.mark.parametrize(("transport", "mode"), CLIENTS)
async def test_a_known_tool_still_answers_after_the_errors(
    transport: str, mode: str, config: Path, http: Any, harness: Any
) -> None:
    async with _client(transport, mode, config, http, harness) as client:
        with anyio.fail_after(WAIT_S):
            for _ in range(2):
                with pytest.raises(MCPError):
                    await client.call_tool("no_such_tool", {})
            result = await client.call_tool("search", {"query": "anything"})
    assert not result.is_error, harness.text_of(result)


# --- a raw 2025-era session: what the SDK's client would refuse to send ----------------------


def _rpc(method: str, params: dict[str, Any], request_id: int | None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if request_id is not None:
        message["id"] = request_id
    return json.dumps(message)


def _answer(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response sent as JSON or as one server-sent event."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()  # type: ignore[no-any-return]
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            decoded: dict[str, Any] = json.loads(line[5:])
            if "id" in decoded:
                return decoded
    raise AssertionError(f"no JSON-RPC answer in: {response.text[:500]}")


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"name": "no_such_tool", "arguments": {}}, UNKNOWN_TOOL),
        ({"name": "execute", "arguments": "print(1)"}, -32602),  # arguments not an object
        ({"arguments": {"code": "print(1)"}}, -32602),  # no tool name
    ],
    ids=["unknown-tool", "arguments-not-object", "no-name"],
)
def test_a_raw_2025_session_gets_the_code(
    http: Any, harness: Any, params: dict[str, Any], code: int
) -> None:
    headers = {
        **harness.bearer(harness.MAIN),
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
    }
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    with httpx2.Client(timeout=WAIT_S) as client:
        opened = client.post(http.url, content=_rpc("initialize", hello, 1), headers=headers)
        assert opened.status_code == 200, opened.text
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        headers["mcp-protocol-version"] = "2025-11-25"
        done = client.post(
            http.url, content=_rpc("notifications/initialized", {}, None), headers=headers
        )
        assert done.status_code == 202, done.text
        answer = _answer(
            client.post(http.url, content=_rpc("tools/call", params, 2), headers=headers)
        )
        client.delete(http.url, headers=headers)
    assert answer.get("error", {}).get("code") == code, answer

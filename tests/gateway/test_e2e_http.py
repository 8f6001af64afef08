"""Streamable HTTP only: handles bound to the caller, raw malformed requests, many clients."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest

from codemode.demo import ACME_LEAD_ID

pytestmark = [pytest.mark.anyio, pytest.mark.thirdparty]

PROTOCOL = "2026-07-28"
TOKEN = "main-token-00"  # conftest.TOKENS["main"]
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
async def gateway(gateway_dirs: Any, harness: Any) -> AsyncIterator[Any]:
    async with harness.open_gateway("http", gateway_dirs) as opened:
        yield opened


async def test_a_handle_is_bound_to_the_caller_that_opened_it(gateway: Any, harness: Any) -> None:
    alice = gateway.connect(headers=harness.bearer("alice"))
    bob = gateway.connect(headers=harness.bearer("bob"))
    async with alice as alice, bob as bob:
        mine = await harness.execute_ok(alice, "secret = 'alice only'")
        stolen = await bob.call_tool(
            "execute", {"code": "print(secret)", "session": mine["session"]}
        )
        assert stolen.is_error and stolen.structured_content is None
        # A foreign handle reads exactly like an unknown one.
        assert "unknown or expired session" in harness.text_of(stolen)
        assert "alice only" not in harness.text_of(stolen)
        # Nor is the owner of another valid token.
        anonymous = await gateway.client.call_tool(
            "execute", {"code": "print(secret)", "session": mine["session"]}
        )
        assert anonymous.is_error and "unknown or expired session" in harness.text_of(anonymous)
        again = await harness.execute_ok(alice, "print(secret)", session=mine["session"])
        assert again["stdout"] == "alice only\n"


def _post(
    url: str, body: str, method: str, tool: str | None, token: str | None = TOKEN
) -> httpx2.Response:
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": PROTOCOL,
        "mcp-method": method,
    }
    if tool is not None:
        headers["mcp-name"] = tool
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return httpx2.post(url, content=body, headers=headers, timeout=30)


def _call(params: dict[str, Any], method: str = "tools/call") -> str:
    return json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": ENVELOPE}}
    )


@pytest.mark.parametrize(
    ("body", "method", "tool", "code"),
    [
        ("{not json", "tools/call", "execute", -32700),
        ('[{"jsonrpc": "2.0", "id": 1,', "tools/call", "execute", -32700),
        (_call({"name": "execute", "arguments": "print(1)"}), "tools/call", "execute", -32602),
        (_call({"arguments": {"code": "print(1)"}}), "tools/call", None, -32602),
        (_call({}, method="tools/explode"), "tools/explode", None, -32601),
    ],
    ids=["bad-json", "truncated", "arguments-not-object", "no-tool-name", "unknown-method"],
)
async def test_malformed_http_requests_get_json_rpc_errors(
    gateway: Any, harness: Any, body: str, method: str, tool: str | None, code: int
) -> None:
    response = await anyio.to_thread.run_sync(_post, gateway.http.url, body, method, tool)
    assert response.status_code in (200, 400, 404), response.text
    assert response.json()["error"]["code"] == code, response.text
    data = await harness.execute_ok(gateway.client, "print('still serving')")
    assert data["stdout"] == "still serving\n"


async def test_a_raw_2026_request_runs_code(gateway: Any) -> None:
    """The same endpoint answers a hand-written request: the wire format, not just the SDK."""
    body = _call({"name": "execute", "arguments": {"code": "print(2 ** 10)"}})
    response = await anyio.to_thread.run_sync(
        _post, gateway.http.url, body, "tools/call", "execute"
    )
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["structuredContent"]["stdout"] == "1024\n"
    assert result["isError"] is False
    assert result["structuredContent"]["session"].startswith("s_")


async def test_concurrent_clients_get_their_own_answers(gateway: Any, harness: Any) -> None:
    results: dict[int, dict[str, Any]] = {}

    async def one(index: int) -> None:
        code = f"""\
from servers import crm, fake
marker = "client-{index}"
total = fake.add(a={index}, b=1000)
lead = crm.get_lead(lead_id="{ACME_LEAD_ID}")
print(marker, total, lead["id"])
"""
        # Clients of one owner share a default session: each client here is an owner.
        async with gateway.connect(headers=harness.bearer(f"client-{index}")) as client:
            first = await harness.execute_ok(client, code)
            second = await harness.execute_ok(
                client, "print(marker, total * 2)", session=first["session"]
            )
            results[index] = {"first": first, "second": second}

    with anyio.fail_after(120):
        async with anyio.create_task_group() as group:
            for index in range(6):
                group.start_soon(one, index)
    assert sorted(results) == list(range(6))
    sessions = {result["first"]["session"] for result in results.values()}
    assert len(sessions) == 6
    for index, result in results.items():
        assert result["first"]["stdout"] == f"client-{index} {1000 + index} {ACME_LEAD_ID}\n"
        assert result["second"]["stdout"] == f"client-{index} {2 * (1000 + index)}\n"

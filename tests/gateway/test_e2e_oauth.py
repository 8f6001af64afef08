"""OAuth 2.1 resource-server mode: the gateway accepts access tokens an authorization server
vouches for (token introspection), publishes its protected resource metadata, and makes each
token's subject an owner.

The authorization server is a twin (no identity provider runs here): a small HTTP server in
this process that answers RFC 7662 introspection requests from a table of tokens.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import anyio
import httpx2
import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.thirdparty]

CLIENT = ("codemode-gateway", "introspection-secret")
SCOPE = "codemode"


class IntrospectionTwin(BaseHTTPRequestHandler):
    """Answers POST /introspect from ``server.tokens``; refuses wrong client credentials."""

    server: Any

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        form = parse_qs(self.rfile.read(length).decode())
        expected = "Basic " + base64.b64encode(":".join(CLIENT).encode()).decode()
        if self.headers.get("authorization") != expected:
            self._send(401, {"error": "invalid_client"})
            return
        token = form.get("token", [""])[0]
        self.server.seen.append(token)
        self._send(200, self.server.tokens.get(token, {"active": False}))

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def authorization_server() -> Iterator[Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), IntrospectionTwin)
    server.tokens = {}
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
async def gateway(
    tmp_path_factory: pytest.TempPathFactory,
    fake_server_argv: list[str],
    harness: Any,
    authorization_server: Any,
) -> AsyncIterator[Any]:
    root = tmp_path_factory.mktemp("gateway-oauth")
    config = harness.write_config(root, {"fake": fake_server_argv}, pool_size=1)
    gateway = harness.HTTPGateway(config, root / "gateway.log")
    resource = gateway.url
    issuer = f"http://127.0.0.1:{authorization_server.server_port}"
    with config.open("a") as file:
        file.write(
            "\n[gateway.oauth]\n"
            f'issuer = "{issuer}"\n'
            f'introspection_url = "{issuer}/introspect"\n'
            f'resource = "{resource}"\n'
            f'client_id = "{CLIENT[0]}"\n'
            f'client_secret = "{CLIENT[1]}"\n'
            f'scopes = ["{SCOPE}"]\n'
        )
    good = {"active": True, "aud": resource, "scope": f"openid {SCOPE}"}
    authorization_server.tokens.update(
        {
            "alice-access": {**good, "sub": "alice"},
            "bob-access": {**good, "sub": "bob"},
            "other-audience": {**good, "sub": "alice", "aud": "https://elsewhere.example/mcp"},
            "no-scope": {**good, "sub": "alice", "scope": "openid"},
            "revoked": {**good, "sub": "alice", "active": False},
        }
    )
    gateway.start()
    try:
        yield gateway
    finally:
        left = gateway.stop()
        assert not left, f"the gateway left processes behind: {sorted(left)}"


def _get(url: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.get(url, headers=headers or {}, timeout=30)


def _ping(url: str, token: str | None) -> httpx2.Response:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    return httpx2.post(url, content=body, headers=headers, timeout=30)


async def test_the_gateway_publishes_its_protected_resource_metadata(
    gateway: Any, authorization_server: Any
) -> None:
    url = f"http://127.0.0.1:{gateway.port}/.well-known/oauth-protected-resource/mcp"
    response = await anyio.to_thread.run_sync(_get, url)
    assert response.status_code == 200
    document = response.json()
    assert document["resource"] == gateway.url
    assert document["authorization_servers"] == [
        f"http://127.0.0.1:{authorization_server.server_port}"
    ]
    assert document["scopes_supported"] == [SCOPE]
    refused = await anyio.to_thread.run_sync(_ping, gateway.url, None)
    assert refused.status_code == 401
    assert f'resource_metadata="{url}"' in refused.headers["www-authenticate"]


@pytest.mark.parametrize("token", ["other-audience", "no-scope", "revoked", "never-issued"])
async def test_tokens_the_authorization_server_does_not_vouch_for_are_refused(
    gateway: Any, authorization_server: Any, token: str
) -> None:
    response = await anyio.to_thread.run_sync(_ping, gateway.url, token)
    assert response.status_code == 401
    assert token in authorization_server.seen  # it was asked, and said no


async def test_an_access_token_makes_its_subject_an_owner(gateway: Any, harness: Any) -> None:
    alice = {"Authorization": "Bearer alice-access"}
    bob = {"Authorization": "Bearer bob-access"}
    async with (
        harness.client_for(harness.http_target(gateway.url, alice)) as as_alice,
        harness.client_for(harness.http_target(gateway.url, bob)) as as_bob,
    ):
        mine = await harness.execute_ok(as_alice, "secret = 'for alice'")
        stolen = await as_bob.call_tool(
            "execute", {"code": "print(secret)", "session": mine["session"]}
        )
        assert stolen.is_error and "unknown or expired session" in harness.text_of(stolen)
        again = await harness.execute_ok(as_alice, "print(secret)", session=mine["session"])
        assert again["stdout"] == "for alice\n"
    # Static tokens from the config still work beside OAuth.
    main = harness.http_target(gateway.url, harness.bearer(harness.MAIN))
    async with harness.client_for(main) as client:
        served = await harness.execute_ok(client, "print('static token')")
    assert served["stdout"] == "static token\n"

"""What every client meets, with the official Python client: cancel, progress, fair sessions,
protocol error codes and bearer tokens, over streamable HTTP (2026 and 2025 clients).

A gateway of its own: server-memory (whose file shows every call that reached it) and our fake
server upstream, two sessions per client, progress every 0.2 s.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import signal
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.thirdparty]

WAIT_S = 60.0


@pytest.fixture(scope="module")
async def gateway(
    tmp_path_factory: pytest.TempPathFactory, fake_server_argv: list[str], harness: Any
) -> AsyncIterator[Any]:
    root = tmp_path_factory.mktemp("gateway-clients")
    memory_file = root / "memory.jsonl"
    config = harness.write_config(
        root,
        {
            "memory": harness.THIRD_PARTY["memory"],
            "filesystem": [*harness.THIRD_PARTY["filesystem"], str(root)],
            "fake": fake_server_argv,
        },
        env={"memory": {"MEMORY_FILE_PATH": str(memory_file)}},
        pool_size=1,
        gateway={"max_sessions_per_client": 2, "progress_interval_s": 0.2},
    )
    dirs = harness.GatewayDirs(root, config, root / "data", root, memory_file)
    async with harness.open_gateway("http", dirs) as opened:
        yield opened


def _memory(gateway: Any) -> str:
    path = gateway.dirs.memory_file
    return path.read_text() if path.exists() else ""


# --- cancel and progress --------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_cancel_stops_the_code_and_no_upstream_call_happens_after_it(
    gateway: Any, harness: Any, mode: str
) -> None:
    entity = f"after-cancel-{secrets.token_hex(4)}"
    code = f"""\
import time
from servers import memory
print("started", flush=True)
try:
    time.sleep(300)
except BaseException:
    pass
memory.create_entities(entities=[{{"name": "{entity}", "entityType": "t", "observations": []}}])
"""
    owner = "alice" if mode == "auto" else "bob"
    async with gateway.connect(mode=mode, headers=harness.bearer(owner)) as client:
        kept = await harness.execute_ok(client, "kept = 'state before the cancel'")
        # A 2026-era client continues its session by its handle; a 2025-era one by its
        # connection (its calls without a handle).
        handle = {"session": kept["session"]} if mode == "auto" else {}
        started = anyio.Event()

        async def progress(value: float, total: float | None, message: str | None) -> None:
            if message and "0 bytes printed" not in message:
                started.set()  # the code printed: it runs

        async with anyio.create_task_group() as group:
            arguments = {"code": code, **handle}
            group.start_soon(lambda: client.call_tool("execute", arguments, None, progress))
            with anyio.fail_after(WAIT_S):
                await started.wait()
            group.cancel_scope.cancel()
        # The session answers the next call, and says what the cancelled call did: the
        # sleep was interrupted, the upstream call was refused.
        with anyio.fail_after(WAIT_S):
            after = await harness.execute(client, "print('next')", **handle)
    assert after["stdout"] == "next\n", after["text"]
    report = after["cancelled_before"]
    assert report["status"] == "cancelled"
    assert report["refused_after_cancel"] == 1
    assert entity not in _memory(gateway)


class _LegacyWire:
    """A 2025-11-25 streamable HTTP client written by hand, so it can do what the SDK's client
    never does: drop the connection mid-call without sending ``notifications/cancelled``."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url = url
        self.headers = {
            **headers,
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        self.next_id = 0

    def _body(self, method: str, params: dict[str, Any], *, notify: bool = False) -> str:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        return json.dumps(message)

    async def open(self, http: httpx2.AsyncClient) -> None:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "drops-connections", "version": "1"},
        }
        answer = await http.post(
            self.url, content=self._body("initialize", params), headers=self.headers
        )
        assert answer.status_code == 200, answer.text
        self.headers["Mcp-Session-Id"] = answer.headers["mcp-session-id"]
        self.headers["MCP-Protocol-Version"] = "2025-11-25"
        sent = await http.post(
            self.url,
            content=self._body("notifications/initialized", {}, notify=True),
            headers=self.headers,
        )
        assert sent.status_code == 202, sent.text

    def call(self, code: str) -> tuple[str, dict[str, str]]:
        params = {"name": "execute", "arguments": {"code": code}, "_meta": {"progressToken": 1}}
        return self._body("tools/call", params), self.headers


def _events(line: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:])] if line.startswith("data:") and line[5:].strip() else []


async def test_a_2025_client_that_drops_the_connection_cancels_its_call(
    gateway: Any, harness: Any
) -> None:
    """No notifications/cancelled: the client goes away mid-call. The code stops as for a
    cancel, its later upstream call never happens, and the session's next result says so."""
    entity = f"after-disconnect-{secrets.token_hex(4)}"
    code = f"""\
import time
from servers import memory
print("started", flush=True)
try:
    time.sleep(300)
except BaseException:
    pass
memory.create_entities(entities=[{{"name": "{entity}", "entityType": "t", "observations": []}}])
"""
    wire = _LegacyWire(gateway.http.url, harness.bearer("client-5"))
    async with httpx2.AsyncClient(timeout=WAIT_S) as http:
        await wire.open(http)
        first = await harness_execute_raw(http, wire, "kept = 1")
        body, headers = wire.call(code)
        with anyio.fail_after(WAIT_S):
            async with http.stream("POST", wire.url, content=body, headers=headers) as stream:
                async for line in stream.aiter_lines():
                    progress = [
                        e for e in _events(line) if e.get("method") == "notifications/progress"
                    ]
                    if any(
                        "0 bytes printed" not in e["params"].get("message", "") for e in progress
                    ):
                        break  # the code printed: it runs. Leaving closes the connection.
    async with httpx2.AsyncClient(timeout=WAIT_S) as http:
        with anyio.fail_after(WAIT_S):
            after = await harness_execute_raw(http, wire, "print('next')")
    assert after["stdout"] == "next\n", after
    assert after["session"] == first["session"]
    report = after["cancelled_before"]
    assert report["status"] == "cancelled"
    assert report["refused_after_cancel"] == 1
    assert entity not in _memory(gateway)


async def harness_execute_raw(
    http: httpx2.AsyncClient, wire: _LegacyWire, code: str
) -> dict[str, Any]:
    """One ``execute`` over the hand-written wire; its structured result."""
    body, headers = wire.call(code)
    async with http.stream("POST", wire.url, content=body, headers=headers) as stream:
        async for line in stream.aiter_lines():
            for event in _events(line):
                if "result" in event:
                    structured: dict[str, Any] = event["result"]["structuredContent"]
                    return structured
    raise AssertionError("the execute call ended without a result")


async def test_progress_notifications_arrive_while_code_runs(gateway: Any, harness: Any) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    # fake.slow waits upstream: the execution lasts at least a second, progress comes every 0.2.
    code = "from servers import fake\nprint(fake.slow(seconds=1.5))"
    async with gateway.connect(headers=harness.bearer("carol")) as client:
        with anyio.fail_after(WAIT_S):
            result = await client.call_tool("execute", {"code": code}, None, progress)
    assert not result.is_error, harness.text_of(result)
    assert seen, "no progress notification arrived"
    values = [value for value, _, _ in seen]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert any(message and "1 tool call(s)" in message for _, _, message in seen), seen


# --- fair sessions --------------------------------------------------------------------------


async def test_handle_less_calls_of_one_owner_open_sessions_of_their_own(
    gateway: Any, harness: Any
) -> None:
    """Behaviour changed (issue 26): two agents on one token never share variables unless
    they pass the same handle; the handle comes back in every result."""
    async with gateway.connect(headers=harness.bearer("client-0")) as client:
        assert not client.protocol_version.startswith("2025")
        first = await harness.execute_ok(client, "x = 5")
        second = await harness.execute_ok(client, "print('x' in dir())")
        third = await harness.execute_ok(client, "print(x)", session=first["session"])
    assert second["stdout"] == "False\n" and second["session"] != first["session"]
    assert third["stdout"] == "5\n" and third["session"] == first["session"]


async def test_session_new_opens_a_second_independent_session(gateway: Any, harness: Any) -> None:
    """One 2025-era connection: `session: "new"` opens another session; handle-less calls
    keep the connection's one; the new handle continues the new one."""
    async with gateway.connect(mode="legacy", headers=harness.bearer("client-6")) as client:
        assert client.protocol_version.startswith("2025")
        default = await harness.execute_ok(client, "x = 'default'")
        other = await harness.execute_ok(client, "print('x' in dir())", session="new")
        assert other["stdout"] == "False\n"
        assert other["session"] != default["session"]
        await harness.execute_ok(client, "x = 'other'", session=other["session"])
        again = await harness.execute_ok(client, "print(x)")
        assert again["stdout"] == "default\n" and again["session"] == default["session"]
        back = await harness.execute_ok(client, "print(x)", session=other["session"])
        assert back["stdout"] == "other\n"


async def test_one_owner_cannot_exhaust_sessions_for_others(gateway: Any, harness: Any) -> None:
    """Behaviour changed (issue 26): 2025-era connections each get a session; at the owner's
    quota (2) the third connection runs too (its least recently used idle session gives its
    place back, checkpointed), and another owner is served all the same."""
    alice = harness.bearer("client-1")
    async with (
        gateway.connect(mode="legacy", headers=alice) as one,
        gateway.connect(mode="legacy", headers=alice) as two,
        gateway.connect(mode="legacy", headers=alice) as three,
    ):
        # Released, a session keeps the variables it named (as idle release does).
        await harness.execute_ok(one, "from state import keep\nmine = 'one'\nkeep('mine')")
        await harness.execute_ok(two, "pass")
        third = await harness.execute_ok(three, "print('third')")
        assert third["stdout"] == "third\n"
        back = await harness.execute_ok(one, "print(mine)")
        assert back["stdout"] == "one\n" and "restored" in back, back["text"]
        # Another owner is served all the same.
        async with gateway.connect(headers=harness.bearer("client-2")) as other:
            served = await harness.execute_ok(other, "print('served')")
        assert served["stdout"] == "served\n"


# --- protocol errors ------------------------------------------------------------------------


def _post(url: str, body: str, headers: dict[str, str]) -> httpx2.Response:
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    return httpx2.post(url, content=body, headers={**sent, **headers}, timeout=30)


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"id": {"not": "an id"}, "method": "ping"},
        [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
        "just a string",
    ],
    ids=["method-not-string", "wrong-version", "id-object", "batch", "not-an-object"],
)
async def test_a_malformed_envelope_is_invalid_request(
    gateway: Any, harness: Any, body: Any
) -> None:
    url, headers = gateway.http.url, harness.bearer(harness.MAIN)
    response = await anyio.to_thread.run_sync(_post, url, json.dumps(body), headers)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == -32600
    assert error["message"].startswith("Invalid Request: ") and len(error["message"]) < 120
    assert "pydantic" not in response.text and "validation error" not in response.text.lower()


# --- bearer tokens --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Bearer not-a-token"}, {"authorization": "Basic bWFpbjp4"}],
    ids=["none", "unknown-token", "not-bearer"],
)
async def test_a_request_without_a_valid_token_is_refused(
    gateway: Any, headers: dict[str, str]
) -> None:
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    response = await anyio.to_thread.run_sync(_post, gateway.http.url, ping, headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in response.json()["error_description"]


async def test_the_official_client_without_a_token_is_refused(gateway: Any) -> None:
    entity = f"no-token-{secrets.token_hex(4)}"
    code = f"""\
from servers import memory
memory.create_entities(entities=[{{"name": "{entity}", "entityType": "t", "observations": []}}])
"""
    # The SDK reports the 401 as an error response (its type differs by protocol era).
    with pytest.raises(Exception):
        async with gateway.connect(headers={"Authorization": "Bearer wrong"}) as client:
            await client.call_tool("execute", {"code": code})
    assert entity not in _memory(gateway)


async def test_another_owners_approval_is_refused(gateway: Any, harness: Any) -> None:
    path = gateway.dirs.root / f"approved-{secrets.token_hex(4)}.txt"
    code = f"from servers import filesystem\nfilesystem.write_file(path='{path}', content='x')"
    async with (
        gateway.connect(headers=harness.bearer("client-3")) as owner,
        gateway.connect(headers=harness.bearer("client-4")) as stranger,
    ):
        paused = await harness.execute(owner, code)
        assert paused["status"] == "approval_required", paused["text"]
        approval = paused["approval"]["id"]
        stolen = await stranger.call_tool("approve", {"approval": approval, "allow": True})
        assert stolen.is_error
        assert not path.exists()
        denied = await owner.call_tool("approve", {"approval": approval, "allow": False})
        assert harness.structured(denied)["status"] == "error"
    assert not path.exists()


class _Lines:
    """JSON lines from a pipe, each read with a bounded wait (select on the raw fd)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def next(self, timeout_s: float) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.fd], [], [], timeout_s)
            assert ready, "the gateway did not answer in time"
            chunk = os.read(self.fd, 65536)
            assert chunk, "the gateway closed stdout"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer


def test_stdio_answers_malformed_lines_with_json_rpc_errors(tmp_path: Any, harness: Any) -> None:
    """The SDK drops such lines silently over stdio; the client would wait forever."""
    config = harness.write_config(tmp_path, {}, pool_size=0)
    process = subprocess.Popen(
        harness.serve_argv(config),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None
    try:
        lines = [
            b'{"jsonrpc": "2.0", "id": 1, "method": 5}\n',
            b"this is not json\n",
            b'{"jsonrpc": "2.0", "id": 2, "method": "ping"}\n',
        ]
        process.stdin.write(b"".join(lines))
        process.stdin.flush()
        assert process.stdout is not None
        lines_out = _Lines(process.stdout.fileno())
        invalid = lines_out.next(harness.START_TIMEOUT_S)
        assert invalid["error"]["code"] == -32600 and invalid["id"] is None
        assert invalid["error"]["message"].startswith("Invalid Request")
        unparsable = lines_out.next(harness.START_TIMEOUT_S)
        assert unparsable["error"]["code"] == -32700
        # Still serving: the ping after them is answered.
        assert lines_out.next(harness.START_TIMEOUT_S) == {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {},
        }
    finally:
        process.stdin.close()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=harness.STOP_TIMEOUT_S)

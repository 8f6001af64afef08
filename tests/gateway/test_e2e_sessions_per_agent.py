"""Sessions per agent, quotas that free themselves, through real clients over HTTP.

Findings: with one token, every 2025-era connection's default session counted toward the
per-token quota and was not freed by DELETE or disconnect, so the connection past the quota
could not run code for 15 minutes; 2026-era clients on one token shared one default session
(one agent saw another's variables). Now a 2025-era connection's session is released
(checkpointed) when the connection ends, released sessions do not count, a client at its
quota releases its own least recently used idle session, and a 2026-era call without a
handle gets a session of its own whose handle comes back in its result.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

pytestmark = [pytest.mark.anyio]

WAIT_S = 60.0
QUOTA = 2
# Released, a session keeps the variables it named (as idle release does).
KEEP = "from state import keep\n{name} = {value}\nkeep('{name}')"
BLOCK = """\
import time
print("started", flush=True)
time.sleep(300)
"""


@pytest.fixture(scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory, harness: Any) -> AsyncIterator[Any]:
    root = tmp_path_factory.mktemp("per-agent")
    config = harness.write_config(
        root,
        {},
        pool_size=1,
        gateway={"max_sessions_per_client": QUOTA, "progress_interval_s": 0.2},
    )
    http = harness.HTTPGateway(
        config, root / "gateway.log", extra_args=("--log-level", "info")
    ).start()
    try:
        yield http
    finally:
        left = http.stop()
    assert not left, f"the gateway left processes behind: {sorted(left)}"


def _connect(gateway: Any, harness: Any, owner: str, mode: str = "auto") -> Any:
    return harness.client_for(harness.http_target(gateway.url, harness.bearer(owner)), mode=mode)


async def test_2025_connections_past_the_quota_run_code_and_keep_their_variables(
    gateway: Any, harness: Any
) -> None:
    """Three connections of one token at once, quota 2: the third runs at once (the least
    recently used idle session gives its place back), and the first still has its variable."""
    async with (
        _connect(gateway, harness, "alice", "legacy") as one,
        _connect(gateway, harness, "alice", "legacy") as two,
        _connect(gateway, harness, "alice", "legacy") as three,
    ):
        assert one.protocol_version.startswith("2025")
        with anyio.fail_after(WAIT_S):
            first = await harness.execute_ok(one, KEEP.format(name="x", value="'one'"))
            await harness.execute_ok(two, "x = 'two'")
            third = await harness.execute_ok(three, "print('third runs')")
            again = await harness.execute_ok(one, "print(x)")
    assert third["stdout"] == "third runs\n"
    assert again["stdout"] == "one\n" and again["session"] == first["session"]
    assert "restored" in again, again["text"]  # it was released for the third


async def test_connections_that_come_and_go_never_use_up_the_quota(
    gateway: Any, harness: Any
) -> None:
    for index in range(QUOTA * 2 + 1):
        async with _connect(gateway, harness, "bob", "legacy") as client:
            with anyio.fail_after(WAIT_S):
                done = await harness.execute_ok(client, f"print({index})")
        assert done["stdout"] == f"{index}\n"


async def test_a_deleted_2025_connection_releases_its_session(gateway: Any, harness: Any) -> None:
    async with _connect(gateway, harness, "carol", "legacy") as client:
        with anyio.fail_after(WAIT_S):
            opened = await harness.execute_ok(client, KEEP.format(name="kept", value="41"))
    # Leaving the client sent DELETE: the gateway checkpoints and releases the session.
    handle = opened["session"]
    deadline = time.monotonic() + WAIT_S
    while f"session {handle[:12]} was checkpointed and released" not in gateway.log():
        assert time.monotonic() < deadline, f"not released:\n{gateway.log()}"
        await anyio.sleep(0.05)  # a bounded poll on the gateway's log
    # The handle still continues it (restored from its checkpoint), for whoever holds it.
    async with _connect(gateway, harness, "carol") as later:
        with anyio.fail_after(WAIT_S):
            resumed = await harness.execute_ok(later, "print(kept + 1)", session=handle)
    assert resumed["stdout"] == "42\n", resumed["text"]


async def test_2026_calls_without_a_handle_never_share_a_session(
    gateway: Any, harness: Any
) -> None:
    """Two agents on one token: neither sees the other's variables unless given its handle."""
    async with (
        _connect(gateway, harness, "client-3") as agent_a,
        _connect(gateway, harness, "client-3") as agent_b,
    ):
        assert not agent_a.protocol_version.startswith("2025")
        with anyio.fail_after(WAIT_S):
            mine = await harness.execute_ok(agent_a, "secret = 'a only'")
            theirs = await harness.execute_ok(agent_b, "print('secret' in dir())")
            again = await harness.execute_ok(agent_a, "print(secret)", session=mine["session"])
    assert theirs["stdout"] == "False\n" and theirs["session"] != mine["session"]
    assert again["stdout"] == "a only\n"


async def test_calls_without_a_handle_never_exhaust_the_quota(gateway: Any, harness: Any) -> None:
    async with _connect(gateway, harness, "client-4") as client:
        with anyio.fail_after(WAIT_S):
            handles = {
                (await harness.execute_ok(client, f"print({index})"))["session"]
                for index in range(QUOTA * 3)
            }
    assert len(handles) == QUOTA * 3


async def test_a_quota_held_by_running_code_is_refused_naming_the_sessions(
    gateway: Any, harness: Any
) -> None:
    """Only sessions that run code (or wait for an approval) can fill a quota; the refusal
    names them and says how to free them; cancelling one frees its place."""
    async with _connect(gateway, harness, "client-5") as client:
        running = [anyio.Event() for _ in range(QUOTA)]

        def progress_to(started: anyio.Event) -> Any:
            async def progress(value: float, total: float | None, message: str | None) -> None:
                if message and "0 bytes printed" not in message:
                    started.set()  # the code printed: it runs

            return progress

        async with anyio.create_task_group() as group:
            for started in running:
                call = client.call_tool("execute", {"code": BLOCK}, None, progress_to(started))
                group.start_soon(lambda call=call: call)
            with anyio.fail_after(WAIT_S):
                for started in running:
                    await started.wait()
                refused = await client.call_tool("execute", {"code": "print(1)"})
            group.cancel_scope.cancel()
        assert refused.is_error
        text = harness.text_of(refused)
        assert f"gateway.max_sessions_per_client = {QUOTA}" in text, text
        assert text.count("running code") == QUOTA, text
        assert "cancel" in text and "pass the `session` handle" in text
        with anyio.fail_after(WAIT_S):
            served = await _retry_until_served(client, harness)
    assert served["stdout"] == "served\n"


async def _retry_until_served(client: Any, harness: Any) -> dict[str, Any]:
    """The cancelled calls stop in the background: their places come back when they have."""
    while True:
        result = await client.call_tool("execute", {"code": "print('served')"})
        if not result.is_error:
            return dict(harness.structured(result))
        assert "max_sessions_per_client" in harness.text_of(result), harness.text_of(result)
        await anyio.sleep(0.05)  # a bounded poll (the caller's fail_after) on the gateway

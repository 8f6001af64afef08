"""Session limits over HTTP: max_sessions, idle expiry that reclaims sandboxes, busy sessions kept.

A gateway of its own with a 1.5 s idle timeout and room for two sessions; only our fake server
upstream, so it starts fast.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # waits for real idle timeouts

IDLE_S = 1.5


@pytest.fixture(scope="module")
async def gateway(
    tmp_path_factory: pytest.TempPathFactory, fake_server_argv: list[str], harness: Any
) -> AsyncIterator[Any]:
    root = tmp_path_factory.mktemp("gateway-expiry")
    config = harness.write_config(
        root,
        {"fake": fake_server_argv},
        pool_size=1,
        gateway={"session_idle_timeout_s": IDLE_S, "max_sessions": 2},
    )
    dirs = harness.GatewayDirs(root, config, root / "data", root, root / "memory.jsonl")
    async with harness.open_gateway("http", dirs) as opened:
        yield opened


def _guests(gateway: Any, harness: Any) -> set[int]:
    """The sandbox interpreters below the gateway."""
    (pid,) = gateway.gateway_pids()
    return harness.descendants(pid) & harness.pids_whose_cmdline_contains("_codemode_guest")


async def test_max_sessions_then_idle_expiry_reclaims_sandboxes(gateway: Any, harness: Any) -> None:
    # Runs first in this module: no session exists yet.
    first = await harness.execute_ok(gateway.client, "a = 1")
    second = await harness.execute_ok(gateway.client, "b = 2")
    refused = await gateway.client.call_tool("execute", {"code": "print(3)"})
    assert refused.is_error
    assert "too many sessions (2)" in harness.text_of(refused)
    assert "gateway.max_sessions" in harness.text_of(refused)

    guests = _guests(gateway, harness)
    assert len(guests) >= 2  # the two sessions' sandboxes (plus the warm spare)
    # Idle sessions are reclaimed by the gateway on its own: their sandboxes die.
    deadline = time.monotonic() + 30
    while len(guests - {pid for pid in guests if harness.alive(pid)}) < 2:
        assert time.monotonic() < deadline, "idle sessions were not reclaimed within 30 s"
        harness.wait_until_gone(guests, timeout_s=0.2)
    for handle in (first["session"], second["session"]):
        gone = await gateway.client.call_tool("execute", {"code": "print(a)", "session": handle})
        assert gone.is_error and "unknown or expired session" in harness.text_of(gone)
    # The slots are free again.
    await harness.execute_ok(gateway.client, "print('new')")


async def test_a_busy_session_outlives_the_idle_timeout(gateway: Any, harness: Any) -> None:
    code = f"from servers import fake\nstate = 'kept'\nprint(fake.slow(seconds={IDLE_S * 2}))"
    data = await harness.execute_ok(gateway.client, code)
    assert "done" in data["stdout"]
    again = await harness.execute_ok(gateway.client, "print(state)", session=data["session"])
    assert again["stdout"] == "kept\n"

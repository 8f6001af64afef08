"""Idle release through a real gateway process: a client that goes away leaves no sandbox
behind, and its session comes back whole when asked for again.

A gateway of its own over HTTP that releases sessions idle for 0.3 s; only our fake server
upstream, so it starts fast.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio

RELEASE_S = 0.3


@pytest.fixture(scope="module")
async def gateway(
    tmp_path_factory: pytest.TempPathFactory, fake_server_argv: list[str], harness: Any
) -> AsyncIterator[Any]:
    root = tmp_path_factory.mktemp("gateway-idle-release")
    config = harness.write_config(
        root, {"fake": fake_server_argv}, pool_size=1, gateway={"idle_release_s": RELEASE_S}
    )
    dirs = harness.GatewayDirs(root, config, root / "data", root, root / "memory.jsonl")
    async with harness.open_gateway("http", dirs) as opened:
        yield opened


async def _process_named(harness: Any, tag: str) -> int:
    """The pid of the process the running code named ``tag`` (a bounded poll of /proc)."""
    with anyio.fail_after(30):
        while True:
            try:
                pid: int = harness.process_named(tag)
            except AssertionError:
                await anyio.sleep(0.05)
                continue
            return pid


async def test_a_gone_clients_session_holds_no_sandbox_and_comes_back_whole(
    gateway: Any, harness: Any
) -> None:
    tag = f"cm{secrets.token_hex(4)}"
    code = (
        f"open('/proc/self/comm', 'w').write({tag!r})\n"
        "from state import keep\n"
        "open('plan.txt', 'w').write('step 1')\n"
        "plan = ['step 1']\n"
        "keep('plan')\n"
    )
    alice = harness.bearer("alice")
    # A 2025-era client: its HTTP session ends when it disconnects. The sandbox is found while
    # its execution runs: once idle for RELEASE_S it may already be gone.
    ran: dict[str, Any] = {}
    async with gateway.connect(mode="legacy", headers=alice) as client:

        async def run() -> None:
            ran.update(await harness.execute_ok(client, code + "import time\ntime.sleep(2)\n"))

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            pid = await _process_named(harness, tag)
        handle = ran["session"]
    left = harness.wait_until_gone({pid}, timeout_s=30)
    assert not left, f"the sandbox of a gone client's session still runs after 30 s: {left}"

    async with gateway.connect(headers=alice) as client:
        back = await harness.execute_ok(
            client, "print(open('plan.txt').read(), plan)", session=handle
        )
    assert back["stdout"] == "step 1 ['step 1']\n"
    assert back["restored"] == {
        "files": ["plan.txt"],
        "variables": ["plan"],
        "taken_at": back["restored"]["taken_at"],
        "reason": "idle",
    }
    assert "sandbox was released" in back["text"]

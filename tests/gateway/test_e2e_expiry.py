"""Session limits over HTTP: max_sessions, idle expiry that reclaims sandboxes, busy sessions kept.

A gateway of its own with a 3 s idle timeout and room for two sandboxes, idle release off
(idle sessions keep theirs, so a third session is refused); only our fake server upstream, so
it starts fast. The first test needs its three clients' calls within the idle timeout: with
1.5 s a loaded CI machine once took longer, and the third session found a slot.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # waits for real idle timeouts

IDLE_S = 3.0


@pytest.fixture(scope="module")
async def gateway(
    tmp_path_factory: pytest.TempPathFactory, fake_server_argv: list[str], harness: Any
) -> AsyncIterator[Any]:
    root = tmp_path_factory.mktemp("gateway-expiry")
    config = harness.write_config(
        root,
        {"fake": fake_server_argv},
        pool_size=1,
        gateway={"session_idle_timeout_s": IDLE_S, "max_sessions": 2, "idle_release_s": 0},
    )
    dirs = harness.GatewayDirs(root, config, root / "data", root, root / "memory.jsonl")
    async with harness.open_gateway("http", dirs) as opened:
        yield opened


async def test_max_sessions_then_idle_expiry_reclaims_sandboxes(gateway: Any, harness: Any) -> None:
    # Runs first in this module: no session exists yet. Each session's interpreter renames
    # itself (/proc/self/comm) so the test can find its host process. One owner's handle-less
    # calls share a session: two owners fill the gateway, a third is refused.
    tags = [f"cm{secrets.token_hex(4)}" for _ in range(2)]
    rename = "open('/proc/self/comm', 'w').write({!r})\nvalue = 1"
    handles = []
    for owner, tag in zip(("alice", "bob"), tags, strict=True):
        async with gateway.connect(headers=harness.bearer(owner)) as client:
            handles.append((await harness.execute_ok(client, rename.format(tag)))["session"])
    pids = {harness.process_named(tag) for tag in tags}
    assert len(pids) == 2 and all(harness.alive(pid) for pid in pids)

    async with gateway.connect(headers=harness.bearer("carol")) as carol:
        refused = await carol.call_tool("execute", {"code": "print(3)"})
        assert refused.is_error
        assert "gateway.max_sessions = 2" in harness.text_of(refused)

        # With no further request, the gateway reclaims both idle sessions: their sandboxes die.
        left = harness.wait_until_gone(pids, timeout_s=30)
        assert not left, f"idle sessions' sandboxes still run after 30 s: {left}"
        async with gateway.connect(headers=harness.bearer("alice")) as alice:
            for handle in handles:
                gone = await alice.call_tool("execute", {"code": "print(value)", "session": handle})
                assert gone.is_error and "unknown or expired session" in harness.text_of(gone)
        # The slots are free again.
        await harness.execute_ok(carol, "print('new')")


async def test_a_busy_session_outlives_the_idle_timeout(gateway: Any, harness: Any) -> None:
    code = f"from servers import fake\nstate = 'kept'\nprint(fake.slow(seconds={IDLE_S * 2}))"
    data = await harness.execute_ok(gateway.client, code)
    assert "done" in data["stdout"]
    again = await harness.execute_ok(gateway.client, "print(state)", session=data["session"])
    assert again["stdout"] == "kept\n"

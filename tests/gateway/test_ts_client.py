"""The TypeScript SDK client (npm ``@modelcontextprotocol/sdk``, on Node 22 from npm) against
the HTTP gateway: the behaviour that is specific to that client.

Its requests give up after a timeout (60 s by default) unless progress notifications reset it;
when it gives up or is aborted it sends ``notifications/cancelled``. Here the timeout is 1.5 s
and the code waits 3 s on an upstream (fake.slow), so only progress keeps the call alive.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.thirdparty]

SCRIPT = Path(__file__).with_name("ts_client.mjs")
RUN_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def http_gateway(
    tmp_path_factory: pytest.TempPathFactory, fake_server_argv: list[str], harness: Any
) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("gateway-ts")
    config = harness.write_config(
        root, {"fake": fake_server_argv}, pool_size=1, gateway={"progress_interval_s": 0.25}
    )
    gateway = harness.HTTPGateway(config, root / "gateway.log").start()
    try:
        yield gateway
    finally:
        left = gateway.stop()
        assert not left, f"the gateway left processes behind: {sorted(left)}"


def _run(harness: Any, gateway: Any, owner: str, scenario: str) -> dict[str, Any]:
    node = harness.NODE_BIN / "node"
    if not node.exists():
        pytest.fail(f"{node} is missing: run `make third-party` first")
    modules = harness.NODE_BIN.parent
    token = harness.TOKENS[owner]
    argv = [str(node), str(SCRIPT), str(modules), gateway.url, token, scenario]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}\n{gateway.log()}"
    answer: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return answer


def test_progress_keeps_a_long_call_alive_past_the_client_timeout(
    http_gateway: Any, harness: Any
) -> None:
    out = _run(harness, http_gateway, "alice", "timeout-with-progress")
    assert out["stdout"] == "started\ndone\n"
    assert out["progress"] >= 2


@pytest.mark.parametrize("scenario", ["timeout-without-reset", "abort"])
def test_a_call_the_client_gives_up_on_is_cancelled(
    http_gateway: Any, harness: Any, scenario: str
) -> None:
    owner = "bob" if scenario == "abort" else "carol"
    out = _run(harness, http_gateway, owner, scenario)
    assert out["gave_up"] is True, out
    # The same connection's next call is served and reports the cancelled one: its upstream
    # call was abandoned, so the code never printed the upstream's answer.
    assert out["next_stdout"] == "next\n"
    report = out["cancelled_before"]
    assert report is not None and report["status"] == "cancelled", f"{out}\n{http_gateway.log()}"
    assert report["stdout"] == "started\n"
    assert report["tool_calls"]["by_tool"]["fake.slow"]["calls"] == 1

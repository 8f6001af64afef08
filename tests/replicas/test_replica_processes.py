"""Two real ``codemode serve`` processes over streamable HTTP sharing a real Redis-compatible
server, driven with the official MCP client: sessions move between them, an approval is
granted on the other replica and runs once, a replica killed mid-session loses nothing."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis

from codemode.replicas.audit import RedisAuditLog
from codemode.replicas.connection import SharedRedis
from tests.conftest import RedisServer
from tests.gateway.conftest import HTTPGateway, descendants, wait_until_gone

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
WRITE = (
    "import os\n"
    "from state import keep\n"
    "os.makedirs('notes', exist_ok=True)\n"
    "open('notes/todo.txt', 'w').write('buy pears')\n"
    "totals = {'pears': 3}\n"
    "keep('totals')\n"
)
READ = "print(open('notes/todo.txt').read(), totals['pears'])"


@dataclass
class Cluster:
    redis_url: str
    calls: Path
    a: HTTPGateway
    b: HTTPGateway

    def calls_made(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []


def _config(root: Path, name: str, redis_url: str, calls: Path) -> Path:
    folder = root / name
    folder.mkdir()
    upstream = [sys.executable, str(HERE / "counting_server.py"), str(calls)]
    lines = [
        "[servers.orders]",
        f"command = {json.dumps(upstream[0])}",
        f"args = {json.dumps(upstream[1:])}",
        "",
        "[sandbox]",
        "pool_size = 1",
        "[sandbox.limits]",
        "wall_time_s = 60",
        "",
        "[gateway]",
        f"state_dir = {json.dumps(str(folder / 'state'))}",
        f"shared_store = {json.dumps(redis_url)}",
        "session_lease_s = 2.0",
        "",
        "[policy]",
        'rules = [{ tools = ["orders.place_order"], action = "ask", reason = "it costs" }]',
        "",
    ]
    path = folder / "codemode.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@contextlib.contextmanager
def _cluster(root: Path, redis_url: str) -> Iterator[Cluster]:
    """Replicas A and B, started and stopped side by side (each takes seconds)."""
    calls = root / "calls.txt"
    gateways = [
        HTTPGateway(
            _config(root, name, redis_url, calls),
            root / f"{name}.log",
            extra_args=("--insecure-allow-anonymous",),
        )
        for name in ("a", "b")
    ]
    with ThreadPoolExecutor(2) as pool:
        try:
            list(pool.map(HTTPGateway.start, gateways))
            yield Cluster(redis_url, calls, gateways[0], gateways[1])
        finally:
            list(pool.map(HTTPGateway.stop, gateways))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One Redis and two replicas for the module. The last test kills replica A."""
    root = tmp_path_factory.mktemp("replicas")
    store = RedisServer(root)
    store.start()
    try:
        with _cluster(root, store.url) as opened:
            yield opened
    finally:
        store.stop()


@contextlib.asynccontextmanager
async def _client(gateway: HTTPGateway) -> AsyncIterator[Any]:
    from mcp import Client

    async with Client(gateway.url, read_timeout_seconds=60) as client:
        yield client


async def _call(client: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    data = dict(result.structured_content or {})
    data["text"], data["is_error"] = text, bool(result.is_error)
    return data


async def test_sessions_and_approvals_move_between_two_replica_processes(
    cluster: Cluster,
) -> None:
    async with _client(cluster.a) as a, _client(cluster.b) as b:
        wrote = await _call(a, "execute", code=WRITE)
        assert wrote["status"] == "ok", wrote["text"]
        handle = wrote["session"]
        moved = await _call(b, "execute", code=READ, session=handle)
        assert (moved["status"], moved["stdout"]) == ("ok", "buy pears 3\n"), moved["text"]
        assert moved["restored"] == {
            "files": ["notes/todo.txt"],
            "variables": ["totals"],
            "taken_at": moved["restored"]["taken_at"],
            "reason": "lost",  # this replica did not hold its sandbox
        }

        code = "from servers import orders\nprint(orders.place_order(item='pear'))"
        paused = await _call(a, "execute", code=code, session=handle)
        assert paused["status"] == "approval_required", paused["text"]
        approval = paused["approval"]
        busy = await _call(b, "execute", code="print(1)", session=handle)
        assert busy["is_error"] and "another gateway replica" in busy["text"]
        assert cluster.calls_made() == []
        granted = await _call(b, "approve", approval=approval["id"], allow=True)
        assert (granted["status"], granted["stdout"]) == ("ok", "ordered pear\n"), granted
        assert cluster.calls_made() == ["pear"]
        again = await _call(a, "approve", approval=approval["id"], allow=True)
        assert again["is_error"] and "already decided" in again["text"]
        assert cluster.calls_made() == ["pear"]
    # Both replicas write one chained audit log: the call is in it once, as approved.
    shared = SharedRedis(cluster.redis_url)
    log = RedisAuditLog(shared)
    orders = [event for event in log.query() if event.tool == "place_order"]
    assert [(e.decision, e.outcome) for e in orders] == [("ask-approved", "ok")]
    assert log.verify() >= 1
    shared.close()


async def test_a_replica_killed_mid_session_loses_nothing_acknowledged(
    cluster: Cluster,
) -> None:
    store = redis.Redis.from_url(cluster.redis_url)
    assert cluster.a.process is not None
    a_processes = {cluster.a.process.pid}
    async with _client(cluster.a) as a:
        wrote = await _call(a, "execute", code=WRITE)
        assert wrote["status"] == "ok", wrote["text"]
    handle = wrote["session"]
    lease = f"codemode:shared:lease:{handle}"

    async def run_long() -> None:
        # The client of the replica that dies: its call and its connection fail.
        with contextlib.suppress(Exception):
            async with _client(cluster.a) as doomed:
                await _call(doomed, "execute", code="import time\ntime.sleep(50)", session=handle)

    async with anyio.create_task_group() as group:
        group.start_soon(run_long)
        with anyio.fail_after(30):
            while not store.exists(lease):  # A has claimed the session: the code is running
                await anyio.sleep(0.05)
        a_processes |= descendants(cluster.a.process.pid)
        cluster.a.process.kill()
        cluster.a.process.wait(10)
        group.cancel_scope.cancel()  # the doomed call need not time out
    async with _client(cluster.b) as b:
        # The client retries on B: busy until A's lease lapses, then the session continues.
        deadline = time.monotonic() + 30
        while True:
            resumed = await _call(b, "execute", code=READ, session=handle)
            if not (resumed["is_error"] and "another gateway replica" in resumed["text"]):
                break
            assert time.monotonic() < deadline, "A's lease never lapsed"
            await anyio.sleep(0.2)
        assert (resumed["status"], resumed["stdout"]) == ("ok", "buy pears 3\n"), resumed["text"]
        assert resumed["restored"]["files"] == ["notes/todo.txt"]
        assert resumed["restored"]["variables"] == ["totals"]
    store.close()
    # A's sandboxes and upstreams died with it.
    assert not wait_until_gone(a_processes)

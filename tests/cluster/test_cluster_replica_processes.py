"""A replica killed while its sandboxes run on the Ray nodes: two real `codemode serve`
processes sharing a real Redis-compatible server, driven with the official MCP client."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.cluster.conftest import LocalRayCluster, descendants
from tests.gateway.conftest import HTTPGateway, client_for

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

WRITE = "from state import keep\nopen('todo.txt', 'w').write('pears')\ntotal = 3\nkeep('total')"
READ = "print(open('todo.txt').read(), total)"


def _config(root: Path, name: str, cluster: LocalRayCluster, store: str) -> Path:
    folder = root / name
    folder.mkdir()
    lines = [
        "[sandbox.limits]",
        "wall_time_s = 30",
        "[cluster]",
        f"address = {json.dumps(cluster.address)}",
        'stream_host = "127.0.0.1"',
        "[gateway]",
        f"state_dir = {json.dumps(str(folder / 'state'))}",
        f"shared_store = {json.dumps(store)}",
        "session_lease_s = 2.0",
    ]
    path = folder / "codemode.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def replicas(
    ray_cluster: LocalRayCluster, redis_server: Any, tmp_path: Path
) -> Iterator[tuple[HTTPGateway, HTTPGateway]]:
    gateways = [
        HTTPGateway(
            _config(tmp_path, name, ray_cluster, redis_server.url),
            tmp_path / f"{name}.log",
            extra_args=("--insecure-allow-anonymous",),
        )
        for name in ("a", "b")
    ]
    with ThreadPoolExecutor(2) as pool:
        try:
            list(pool.map(HTTPGateway.start, gateways))
            yield gateways[0], gateways[1]
        finally:
            list(pool.map(HTTPGateway.stop, gateways))


async def _execute(gateway: HTTPGateway, **arguments: Any) -> dict[str, Any]:
    async with client_for(gateway.url) as client:
        result = await client.call_tool("execute", arguments)
    data = dict(result.structured_content or {})
    data["text"] = "\n".join(getattr(block, "text", "") for block in result.content)
    data["is_error"] = bool(result.is_error)
    return data


def _commands(pids: set[int]) -> list[str]:
    found = []
    for pid in pids:
        with contextlib.suppress(OSError):
            found.append(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode())
    return found


async def test_a_replica_killed_its_sessions_continue_on_the_other_with_sandboxes_on_the_nodes(
    replicas: tuple[HTTPGateway, HTTPGateway],
) -> None:
    a, b = replicas
    wrote = await _execute(a, code=WRITE)
    assert wrote["status"] == "ok", wrote["text"]
    assert a.process is not None
    a_processes = {a.process.pid, *descendants(a.process.pid)}
    # The sandbox runs on a worker node: nothing of it under the gateway process.
    assert not [c for c in _commands(a_processes) if c.endswith("bwrap")], _commands(a_processes)
    for pid in a_processes:  # what losing the replica's machine does
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    a.process.wait(10)
    deadline = time.monotonic() + 30
    while True:  # the client retries on B (busy only while A's lease has not lapsed)
        moved = await _execute(b, code=READ, session=wrote["session"])
        if not (moved["is_error"] and "another gateway replica" in moved["text"]):
            break
        assert time.monotonic() < deadline, "A's lease never lapsed"
        await anyio.sleep(0.2)
    assert (moved["status"], moved["stdout"]) == ("ok", "pears 3\n"), moved["text"]
    assert moved["restored"]["files"] == ["todo.txt"]
    assert moved["restored"]["variables"] == ["total"]

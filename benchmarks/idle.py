"""What an idle release costs: releasing a session, and its first execution afterwards.

    .venv/bin/python benchmarks/idle.py [--rounds N] [--json]

I1  a warm execute in a session (the baseline): `print(len(rows))`; the session keeps a
    variable, so (as in any such session) each execution is followed by its checkpoint
I2  the same execute right after the session's sandbox was released: a sandbox from the warm
    pool, the checkpoint (a 100 KB file and a kept list of 10,000 ints) restored, then the code
I3  releasing the session (it changed nothing since its checkpoint: the checkpoint's expiry
    is pushed on and the sandbox stopped)
I4  the memory of this process's tree (the engine, the warm pool, the session's sandbox) as
    RSS, PSS and USS (process_memory.py), with the session's sandbox idle and once released

Medians of ``--rounds`` rounds, interleaved, isolation on (bubblewrap), privacy on; the pool is
refilled between rounds so I2 measures a restore, not a cold sandbox start. Not part of the
test suite; `make bench` runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio.to_thread

sys.path.insert(0, str(Path(__file__).resolve().parent))
from process_memory import tree_memory

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.engine import Codemode
from codemode.engine.idle import IdleReleaser
from codemode.sandbox import SandboxSettings
from codemode.sandbox.provider import PooledSandboxes

SETUP = (
    "from state import keep\n"
    "open('data.txt', 'w').write('x' * 100_000)\n"
    "rows = list(range(10_000))\n"
    "keep('rows')\n"
)
CODE = "print(len(rows))"


async def measure(rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="codemode-bench-idle-") as state:
        return await measure_in(Path(state), rounds)


async def measure_in(state: Path, rounds: int) -> dict[str, Any]:
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(pool_size=1),
        # The benchmark releases when it chooses (idle_release_s = 0: never by itself).
        gateway=GatewaySettings(state_dir=state, idle_release_s=0),
    )
    async with Codemode(config, catalog=Catalog([]), semantic=False) as engine:
        assert engine.registry is not None and isinstance(engine.sandboxes, PooledSandboxes)
        pool = engine.sandboxes.pool
        first = await engine.execute(SETUP)
        assert first.status == "ok", first.render_text()
        handle = first.session
        releaser = IdleReleaser(engine.registry, 0)
        samples: dict[str, list[float]] = {"warm": [], "after_release": [], "release": []}
        memory: dict[str, dict[str, float]] = {}
        for index in range(rounds):
            started = time.perf_counter()
            warm = await engine.execute(CODE, session=handle)
            samples["warm"].append((time.perf_counter() - started) * 1000)
            assert warm.stdout == "10000\n" and warm.restored is None
            if index == 0:
                await anyio.to_thread.run_sync(pool.wait_full, 30.0)
                memory["idle"] = tree_memory(os.getpid()).__dict__
            started = time.perf_counter()
            released = await anyio.to_thread.run_sync(releaser.sweep)
            samples["release"].append((time.perf_counter() - started) * 1000)
            assert released == [handle], released
            await anyio.to_thread.run_sync(pool.wait_full, 30.0)
            if index == 0:
                memory["released"] = tree_memory(os.getpid()).__dict__
            started = time.perf_counter()
            back = await engine.execute(CODE, session=handle)
            samples["after_release"].append((time.perf_counter() - started) * 1000)
            assert back.stdout == "10000\n", back.render_text()
            assert back.restored is not None and back.restored.variables == ["rows"]
    medians: dict[str, Any] = {
        name: round(statistics.median(values), 2) for name, values in samples.items()
    }
    medians["after_release_over_warm"] = round(medians["after_release"] / medians["warm"], 1)
    medians["rounds"] = rounds
    return {**medians, "memory_mib": memory}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--smoke", action="store_true", help="one round: does it still run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 1
    numbers = asyncio.run(measure(args.rounds))
    if args.json:
        print(json.dumps(numbers))
        return 0
    print(f"I1 warm execute                              {numbers['warm']:.2f} ms")
    print(
        f"I2 first execute after an idle release       {numbers['after_release']:.2f} ms "
        f"({numbers['after_release_over_warm']}x I1)"
    )
    print(f"I3 releasing an unchanged idle session       {numbers['release']:.2f} ms")
    for state, tree in numbers["memory_mib"].items():
        print(
            f"I4 process tree, session {state + ':':<10}        RSS {tree['rss']:.0f} / "
            f"PSS {tree['pss']:.0f} / USS {tree['uss']:.0f} MiB ({tree['processes']} processes)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

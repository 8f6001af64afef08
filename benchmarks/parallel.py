"""Parallel tool calls: 50 awaitable calls against 50 plain ones, to a stdio MCP upstream whose
tool takes 20 ms, through the whole engine (invoker chain, privacy on) and the real sandbox.

    .venv/bin/python benchmarks/parallel.py [--rounds N] [--json]

P1  `await asyncio.gather(*(crm.get_lead.aio(...) for 50))` in a warm session (target <= 150 ms)
P2  the same 50 calls one after another (`crm.get_lead(...)` in a loop): the serial baseline
P3  the 50 calls gathered on the host's catalog directly (no sandbox): the floor

Medians of ``--rounds`` interleaved rounds, times as measured inside the code (P1, P2) or around
the gather (P3), in one process. Isolation on (bubblewrap).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.connectors.mcp import MCPConnector, StdioTarget
from codemode.engine import Codemode
from codemode.sandbox import SandboxSettings

CALLS = 50
SERVER = '''
import asyncio
from mcp.server import MCPServer

server = MCPServer("crm")


@server.tool()
async def get_lead(lead_id: int) -> str:
    """A lead, after 20 ms."""
    await asyncio.sleep(0.02)
    return f"lead-{lead_id}"


if __name__ == "__main__":
    server.run("stdio")
'''
TIMED = """
import time
started = time.perf_counter()
{body}
print((time.perf_counter() - started) * 1000)
"""


async def measure(rounds: int, calls: int = CALLS) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="codemode-bench-parallel-") as state:
        return await measure_in(Path(state), rounds, calls)


async def measure_in(state: Path, rounds: int, calls: int) -> dict[str, Any]:
    parallel = TIMED.format(
        body=f"await asyncio.gather(*(crm.get_lead.aio(lead_id=i) for i in range({calls})))"
    )
    serial = TIMED.format(body=f"for i in range({calls}):\n    crm.get_lead(lead_id=i)")
    script = state / "crm_server.py"
    script.write_text(SERVER)
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(pool_size=1),
        gateway=GatewaySettings(state_dir=state),
    )
    connector = MCPConnector(
        "crm", StdioTarget(sys.executable, [str(script)]), annotations_default="read_only"
    )
    # The default per-server cap, as a configured server gets it.
    catalog = Catalog([connector], concurrency={"crm": 16})
    async with Codemode(config, catalog=catalog, semantic=False) as engine:
        first = await engine.execute("import asyncio\nfrom servers import crm")
        assert first.status == "ok", first.render_text()
        session = first.session

        async def inside(code: str) -> float:
            result = await engine.execute(code, session=session)
            assert result.status == "ok", result.render_text()
            return float(result.stdout.strip())

        async def direct() -> float:
            started = time.perf_counter()
            await asyncio.gather(
                *(catalog.call("crm", "get_lead", {"lead_id": i}) for i in range(calls))
            )
            return (time.perf_counter() - started) * 1000

        await inside(parallel)  # warm: the tool's module is imported, the upstream started
        samples: dict[str, list[float]] = {"parallel": [], "serial": [], "direct": []}
        for _ in range(rounds):
            samples["parallel"].append(await inside(parallel))
            samples["serial"].append(await inside(serial))
            samples["direct"].append(await direct())
    numbers: dict[str, Any] = {name: round(statistics.median(v), 1) for name, v in samples.items()}
    numbers["serial_over_parallel"] = round(numbers["serial"] / numbers["parallel"], 1)
    return numbers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="one round: does it still run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    numbers = asyncio.run(measure(1, calls=3) if args.smoke else measure(args.rounds))
    if args.json:
        print(json.dumps(numbers))
        return 0
    print(f"P1 50 awaitable calls, gathered          {numbers['parallel']:.1f} ms  (target <= 150)")
    print(f"P2 50 plain calls, one after another      {numbers['serial']:.1f} ms")
    print(f"P3 50 calls gathered on the host (floor)  {numbers['direct']:.1f} ms")
    print(f"   serial / parallel                      {numbers['serial_over_parallel']:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

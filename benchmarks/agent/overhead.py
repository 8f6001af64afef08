"""The agent loop's own cost per round, beyond model time and execution (scripted model).

    python benchmarks/agent/overhead.py [--runs 20]

Each run: 8 rounds (a search, six executions over a growing conversation, an answer) against
a real engine and sandbox. Model time is measured around the provider call, execution time
around the engine call; what is left of the run's wall time is the loop: parsing, context
fitting and token counting, records, feedback. Target: <= 5 ms per round (median of runs).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anyio

from codemode.agent import Agent, ModelProvider, ModelReply, ModelRequest, ScriptedModel
from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.sandbox import SandboxSettings


class Timed(ModelProvider):
    def __init__(self, inner: ModelProvider) -> None:
        self.inner, self.name, self.supports_tools = inner, inner.name, inner.supports_tools
        self.seconds = 0.0

    async def complete(self, request: ModelRequest) -> ModelReply:
        started = time.perf_counter()
        try:
            return await self.inner.complete(request)
        finally:
            self.seconds += time.perf_counter() - started


def lookup(sku: str) -> dict:
    """Stock of one item."""
    return {"sku": sku, "on_hand": len(sku) * 7}


SCRIPT = [
    {"search": "stock of an item", "thoughts": "Find the stock function."},
    *[
        {
            "thoughts": f"Step {i}: look up more items and keep a running total.",
            "execute": f"from servers import stock\ntotal = globals().get('total', 0)\n"
            f"for sku in ['A{i}', 'B{i}', 'C{i}']:\n    total += stock.lookup(sku=sku)['on_hand']\nprint(total)",
        }
        for i in range(6)
    ],
    {"answer": "done"},
]


async def measure(runs: int) -> list[float]:
    config = CodemodeConfig(servers={}, sandbox=SandboxSettings(pool_size=1))
    catalog = Catalog([PythonConnector("stock", [lookup])])
    per_round = []
    async with Codemode(config, catalog=catalog, semantic=False, audit=False) as engine:
        for run in range(runs + 1):
            model = Timed(ScriptedModel(SCRIPT))
            started = time.perf_counter()
            record = await Agent(engine, model).run("total the stock of 18 items")
            wall = time.perf_counter() - started
            assert record.status == "done", record.error
            tool = record.tool_ms / 1000
            if run:  # the first run warms caches (tokenizer, imports)
                per_round.append((wall - model.seconds - tool) / len(record.rounds) * 1000)
    return per_round


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--smoke", action="store_true", help="two runs: does it still run")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 2
    values = anyio.run(measure, args.runs)
    median = statistics.median(values)
    print(
        f"loop overhead per round (scripted model, {args.runs} runs of 8 rounds): "
        f"median {median:.2f} ms, p90 {sorted(values)[int(len(values) * 0.9) - 1]:.2f} ms "
        f"(target <= 5 ms): {'ok' if median <= 5 else 'OVER'}"
    )


if __name__ == "__main__":
    main()

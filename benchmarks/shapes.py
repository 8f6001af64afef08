"""The cost of recording observed result shapes (tools with no output schema).

    .venv/bin/python benchmarks/shapes.py [--smoke]

Prints, for a typical JSON result (a list of 20 records as MCP text): the median cost of one
recorded observation (inferring and merging the shape), and the median cost per call of the
ShapeRecorder wrapper once a tool is past its first recorded results (then one in 64 to one
in 4,096 is recorded, as long as the shape stays the same), against the same calls without the wrapper, in the same process. A tool-call round
trip through the sandbox costs about 26 us, so the steady-state overhead is what matters.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from codemode.catalog.observed import ShapeBook, ShapeRecorder
from codemode.tools import ToolCall, ToolSpec

SPEC = ToolSpec("crm", "list_leads", description="List leads.")
RESULT = json.dumps(
    [
        {
            "id": i,
            "name": f"<PERSON_{i}>",
            "email": f"<EMAIL_{i}>",
            "stage": "won" if i % 3 else "open",
            "amount": 1000.5 * i,
            "tags": ["a", "b"],
            "owner": {"login": "x", "active": True},
        }
        for i in range(20)
    ]
)
CALL = ToolCall("crm", "list_leads", {})
CALLS = 20_000
WARM_UP = 20_000
ROUNDS = 7


class Upstream:
    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        return RESULT


def per_call_us(invoker: Any) -> float:
    started = time.perf_counter()
    for _ in range(CALLS):
        invoker.invoke(CALL, timeout_s=1.0)
    return (time.perf_counter() - started) / CALLS * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one round: does it still run")
    rounds = 1 if parser.parse_args().smoke else ROUNDS
    book = ShapeBook()
    samples = []
    for _ in range(200):
        started = time.perf_counter()
        book.observe(SPEC, RESULT, scrub=None)
        samples.append((time.perf_counter() - started) * 1e6)
    observe_us = statistics.median(samples)

    def specs(server: str, tool: str) -> ToolSpec | None:
        return SPEC

    bare, wrapped = Upstream(), ShapeRecorder(Upstream(), ShapeBook(), specs)
    for _ in range(WARM_UP):  # past the first results and the widening gaps: steady state
        wrapped.invoke(CALL, timeout_s=1.0)
    without, with_recorder = [], []
    for _ in range(rounds):  # alternate, so load on the machine hits both alike
        without.append(per_call_us(bare))
        with_recorder.append(per_call_us(wrapped))
    base, recorded = statistics.median(without), statistics.median(with_recorder)
    print(f"one recorded observation (20 records as JSON text): {observe_us:.1f} us")
    print(
        f"per call, steady state: {recorded - base:.2f} us added "
        f"({base:.2f} -> {recorded:.2f} us, ratio {recorded / base:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

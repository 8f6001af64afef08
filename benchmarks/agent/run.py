"""The agent task suite: every task for codemode and the tool-calling baseline, side by side.

    python benchmarks/agent/run.py                 # reference answers (scripted model): exact ledger
    python benchmarks/agent/run.py --model anthropic:claude-sonnet-4-5   # a real model, same tasks
    python benchmarks/agent/run.py --task sales_growth --paradigm codemode --json

Needs the third-party MCP servers (`make third-party`). Prints, per task, success, rounds, tokens
(o200k, counted by the project's tokenizer for the scripted model; reported by the API for a
real one) and seconds for both paradigms, the per-task token ratio, and the medians.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anyio
import bench_suite


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", help="PROVIDER:MODEL for a real run (default: reference answers)"
    )
    parser.add_argument("--paradigm", choices=[*bench_suite.PARADIGMS, "both"], default="both")
    parser.add_argument("--task", action="append", default=[], help="run only these task ids")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--smoke", action="store_true", help="the first task only: does the suite still run"
    )
    args = parser.parse_args(argv)
    tasks = [t for t in bench_suite.TASKS if not args.task or t.id in args.task]
    if args.smoke:
        tasks = tasks[:1]
    if not tasks:
        parser.error(f"no such task; ids: {', '.join(t.id for t in bench_suite.TASKS)}")
    model_for = bench_suite.reference_model
    if args.model:
        from codemode.agent import make_provider

        make_provider(args.model)  # a missing key fails now
        model_for = lambda task, paradigm, world: make_provider(args.model)  # noqa: E731
    paradigms = bench_suite.PARADIGMS if args.paradigm == "both" else (args.paradigm,)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    async def run_all() -> list[bench_suite.TaskResult]:
        results: list[bench_suite.TaskResult] = []
        with tempfile.TemporaryDirectory(prefix="codemode-agent-bench-") as tmp:
            for paradigm in paradigms:
                results += await bench_suite.run_paradigm(
                    paradigm, tasks, Path(tmp), model_for, progress
                )
        return results

    results = anyio.run(run_all)
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2))
    else:
        print(bench_suite.ledger(results))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Sandboxes on a Ray cluster: warm execute through the remote backend vs local, cold
placement, and a load run. All measured in one process, against a baseline run beside it.

    .venv/bin/python benchmarks/cluster.py [--runs N] [--sessions N] [--json]

Starts a real Ray head and two worker nodes on 127.0.0.1 (the test harness), then:
  warm    times, in alternation so machine load hits both alike, a warm bubblewrap session on
          this machine (the baseline) and a warm session whose sandbox runs on a worker node
          (relay over one TCP stream), for `x = 1` and for one host tool call: medians, p95,
          and the remote/local ratio of the medians;
  cold    the first execution of new sessions (a lease from a node's warm pool, a connection);
  load    N sessions at once across both nodes, 10 executions each with a tool call; every
          result is checked for its own session's values (crosstalk) and counted (errors).
Numbers depend on machine load (2 shared cores here).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codemode.bridge.host import ToolAccess
from codemode.cluster.provider import RaySandboxes
from codemode.sandbox import BwrapBackend, SandboxPool, SandboxSession, SandboxSettings
from codemode.settings.sandbox import Limits
from codemode.tools import ToolCall
from tests.cluster.conftest import SLOT, running_cluster


class HostTools:
    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        return call.arguments["a"] + call.arguments["b"]


PROGRAMS = {
    "x = 1": "x = 1",
    "one tool call": "from servers._runtime import call_tool\ny = call_tool('m', 'add', {'a': 1, 'b': 2})",
}


def _time(session: Any, code: str, tools: ToolAccess) -> float:
    started = time.perf_counter()
    result = session.execute(code, tools=tools)
    elapsed = (time.perf_counter() - started) * 1000
    assert result.status == "ok", result.to_dict()
    return elapsed


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[max(int(len(ordered) * 0.95) - 1, 0)], 3),
    }


def warm(local: Any, remote: Any, runs: int, tools: ToolAccess) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for name, code in PROGRAMS.items():
        for session in (local, remote):
            for _ in range(10):
                _time(session, code, tools)
        samples: dict[str, list[float]] = {"local": [], "remote": []}
        for _ in range(runs):
            samples["local"].append(_time(local, code, tools))
            samples["remote"].append(_time(remote, code, tools))
        entry: dict[str, Any] = {side: _stats(values) for side, values in samples.items()}
        entry["ratio_remote_to_local"] = round(
            entry["remote"]["median_ms"] / entry["local"]["median_ms"], 2
        )
        report[name] = entry
    return report


def cold(provider: RaySandboxes, count: int, tools: ToolAccess) -> dict[str, float]:
    samples = []
    for index in range(count):
        session = provider.open(f"cold-{index}")
        try:
            samples.append(_time(session, "x = 1", tools))
        finally:
            session.close()
        time.sleep(0.3)  # let the node's warm pool refill, as between real arrivals
    return _stats(samples)


def _why(result: Any) -> str:
    reports = result.reports()
    extra = {k: v for k, v in reports.items() if k in ("left_running", "node")}
    reset = " (sandbox reset)" if result.sandbox_reset else ""
    return f"{result.status}{reset} {result.limit or ''} {extra} {result.hint[:120]}"


def load(provider: RaySandboxes, sessions: int, tools: ToolAccess) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    mismatches: list[str] = []
    crosstalk = 0

    def one(index: int) -> None:
        nonlocal crosstalk
        session = provider.open(f"load-{index}")
        try:
            first = session.execute(f"mine = {index}")
            if first.status != "ok" or first.sandbox_reset:
                errors.append(f"first: {_why(first)}")
            for step in range(10):
                code = (
                    "from servers._runtime import call_tool\n"
                    f"print(mine, call_tool('m', 'add', {{'a': mine, 'b': {step}}}))"
                )
                started = time.perf_counter()
                result = session.execute(code, tools=tools)
                latencies.append((time.perf_counter() - started) * 1000)
                if result.status != "ok" or result.sandbox_reset:  # a reset loses state
                    errors.append(_why(result))
                elif result.stdout != f"{index} {index + step}\n":
                    crosstalk += 1
                    mismatches.append(f"{index} {index + step} -> {result.stdout[:80]!r}")
        except Exception as error:  # noqa: BLE001 - counted and reported
            errors.append(repr(error))
        finally:
            session.close()

    started = time.perf_counter()
    with ThreadPoolExecutor(sessions) as pool:
        list(pool.map(one, range(sessions)))
    elapsed = time.perf_counter() - started
    return {
        "sessions": sessions,
        "executions": len(latencies),
        "errors": len(errors),
        "first_errors": errors[:3],
        "mismatches": mismatches[:3],
        "crosstalk": crosstalk,
        "throughput_per_s": round(len(latencies) / elapsed, 1),
        **_stats(latencies or [0.0]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=16, help="concurrent sessions (load)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--load-only", action="store_true", help="skip the warm and cold runs")
    parser.add_argument("--smoke", action="store_true", help="a few runs: does it still run")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.sessions = 2, 2
    settings = SandboxSettings(limits=Limits(memory_bytes=256 << 20), pool_size=1)
    tools = ToolAccess(HostTools())
    report: dict[str, Any] = {"runs": args.runs}
    slots = (args.sessions + 1) // 2 + 2
    with (
        running_cluster(slots={SLOT: slots}) as cluster,
        SandboxPool(BwrapBackend(settings), 1) as pool,
    ):
        provider = RaySandboxes(cluster.settings(), settings)
        local = SandboxSession(pool, "local")
        remote = provider.open("remote")
        try:
            if not args.load_only:
                report["warm"] = warm(local, remote, args.runs, tools)
                report["cold_first_execute"] = cold(provider, 2 if args.smoke else 10, tools)
            report["load"] = load(provider, args.sessions, tools)
        finally:
            local.close()
            remote.close()
            provider.close()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    if args.load_only:
        print(json.dumps(report["load"], indent=2))
        return
    print(f"warm execute, {args.runs} alternating runs each (medians, p95)")
    for name in PROGRAMS:
        entry = report["warm"][name]
        print(
            f"  {name:14} local {entry['local']['median_ms']:7.3f} ms (p95 {entry['local']['p95_ms']:.3f})"
            f"  remote {entry['remote']['median_ms']:7.3f} ms (p95 {entry['remote']['p95_ms']:.3f})"
            f"  ratio {entry['ratio_remote_to_local']:.2f}"
        )
    c = report["cold_first_execute"]
    print(
        f"cold first execute (warm pool on the node): median {c['median_ms']} ms, p95 {c['p95_ms']} ms"
    )
    ld = report["load"]
    print(
        f"load: {ld['sessions']} sessions x 10 executions with a tool call: {ld['executions']} done, "
        f"{ld['errors']} errors, {ld['crosstalk']} crosstalk, {ld['throughput_per_s']}/s, "
        f"median {ld['median_ms']} ms, p95 {ld['p95_ms']} ms {ld['first_errors'] or ''}"
        f"{ld['mismatches'] or ''}"
    )


if __name__ == "__main__":
    main()

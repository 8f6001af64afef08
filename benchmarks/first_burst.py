"""P7c: the first burst a server meets after it starts, the way a new user's clients arrive.

    .venv/bin/python benchmarks/first_burst.py [--rounds N] [--clients N] [--systems a,b]
                                               [--idle S] [--smoke] [--json]

Each round starts every system afresh (codemode and FastMCP 4.2.3's CodeMode, as in
``peers.py``, without the specs), waits until its process tree is quiet (start-up work done),
and sends it one burst: CLIENTS thin clients (``burst_client.py``) connect, initialize and run
a trivial first execute together. Per client the time from the common start to initialized and
to the first answer; per burst their p95, the wall time until the last answer and the tree's
CPU during the burst. The systems take turns going first, round by round, and the ratio is
codemode / FastMCP per round (the median of those below; under 1 is better).

``peers.py``'s P7b sends its bursts to servers that have already served (their warm pools
sized by what came before); here the pool holds only what it keeps at start, as for the first
users of a gateway that has just started. With ``--idle S`` (P7d) codemode's
``idle_release_s`` is S and each burst waits until the server has been idle for longer: its
pool then keeps none ready and its sandbox template has stopped, as for the first users after
a quiet spell (FastMCP waits as long). Without FastMCP installed only codemode runs (no
ratio). Not part of the test suite (``--smoke``: one round of three clients, codemode only,
after 1 s idle);
``make bench`` runs it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from burst_client import burst
from gateway import percentile
from peers import RELEASE_S, SESSIONS, SYSTEMS, quiet, server, trivial
from process_memory import tree_cpu_s, tree_memory


async def first_burst(system: str, clients: int, idle_s: float | None = None) -> dict[str, float]:
    """One fresh server of ``system``, one burst of ``clients``: p95 of initialized and of
    the first execute, the wall time, and the tree's CPU during the burst (ms). ``idle_s``:
    the burst comes after that long idle (codemode's ``idle_release_s``) and 2 s more."""
    release_s = idle_s if idle_s is not None else RELEASE_S
    with (
        tempfile.TemporaryDirectory() as folder,
        server(system, Path(folder), False, release_s) as started,
    ):
        url, pid = started
        await quiet(pid)
        if idle_s is not None:
            await anyio.sleep(idle_s + 2.0)
            await quiet(pid)
        processes = tree_memory(pid).processes
        cpu = tree_cpu_s(pid)
        arrivals, wall = await burst(url, trivial(system), clients)
        used = tree_cpu_s(pid) - cpu
    return {
        "initialized_p95_ms": percentile([a.initialized_ms for a in arrivals], 0.95),
        "executed_p95_ms": percentile([a.executed_ms for a in arrivals], 0.95),
        "wall_ms": wall,
        "tree_cpu_ms": used * 1000,
        "processes_before": processes,
    }


async def measure(
    systems: list[str], rounds: int, clients: int, idle_s: float | None = None
) -> dict[str, Any]:
    runs: dict[str, list[dict[str, float]]] = {system: [] for system in systems}
    for index in range(rounds):
        order = systems if index % 2 == 0 else systems[::-1]
        for system in order:
            runs[system].append(await first_burst(system, clients, idle_s))
    report: dict[str, Any] = {
        "rounds": rounds,
        "clients": clients,
        "idle_s": idle_s,
        "systems": {},
    }
    for system, results in runs.items():
        report["systems"][system] = {
            key: statistics.median(result[key] for result in results) for key in results[0]
        }
    if set(SYSTEMS) <= set(systems):
        ours, theirs = runs["codemode"], runs["fastmcp"]
        report["ratios"] = {
            key: statistics.median(a[key] / b[key] for a, b in zip(ours, theirs, strict=True))
            for key in ("initialized_p95_ms", "executed_p95_ms", "wall_ms")
        }
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=SESSIONS)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument(
        "--idle",
        type=float,
        default=None,
        metavar="S",
        help="P7d: the burst after S seconds idle (codemode's idle_release_s)",
    )
    parser.add_argument("--smoke", action="store_true", help="one round of 3, codemode only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    systems = [name for name in args.systems.split(",") if name]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown or not systems:
        parser.error(f"--systems takes {' and '.join(SYSTEMS)}, got {args.systems!r}")
    if args.rounds < 1 or args.clients < 1:
        parser.error("--rounds and --clients take a whole number of 1 or more")
    if args.idle is not None and args.idle <= 0:
        parser.error("--idle takes a number of seconds above 0")
    if args.smoke:  # after an idle spell: that path takes every step of the other
        systems, args.rounds, args.clients = ["codemode"], 1, 3
        args.idle = args.idle or 1.0
    elif "fastmcp" in systems and find_spec("fastmcp") is None:
        print("FastMCP is not installed (pip install -e '.[bench]'): codemode only")
        systems = [name for name in systems if name != "fastmcp"]
    report = anyio.run(measure, systems, args.rounds, args.clients, args.idle)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    when = "after start" if args.idle is None else f"after {args.idle:g} s idle (P7d)"
    print(f"P7c first burst {when}: {report['clients']} clients, {report['rounds']} rounds")
    print(
        f"{'system':10} {'init p95':>10} {'exec p95':>10} {'wall':>10} {'tree CPU':>10}"
        f" {'processes before':>17}"
    )
    for system, row in report["systems"].items():
        print(
            f"{system:10} {row['initialized_p95_ms']:8.0f}ms {row['executed_p95_ms']:8.0f}ms "
            f"{row['wall_ms']:8.0f}ms {row['tree_cpu_ms']:8.0f}ms {row['processes_before']:17.0f}"
        )
    if "ratios" in report:
        ratios = report["ratios"]
        print(
            f"codemode / FastMCP (median of rounds): initialized {ratios['initialized_p95_ms']:.2f}"
            f", first execute {ratios['executed_p95_ms']:.2f}, wall {ratios['wall_ms']:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

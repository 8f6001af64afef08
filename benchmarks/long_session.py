"""A long session: page after page of new records read in one session, as an agent working
through a CRM does, on the gateway as shipped beside the same gateway with Python's own
collector thresholds (the baseline), reads interleaved.

    .venv/bin/python benchmarks/long_session.py [--reads N] [--smoke] [--json]

Each read is P6c's (``peers.py``): 5,000 new contact records from the upstream's
``contacts`` tool, reduced in code to their count and order total; codemode tokenizes every
record, and the session's vault grows by 10,000 values a read. The values a session keeps are
old objects to Python's collector, which walks its oldest generation whenever that grew by a
quarter; the gateway spaces those walks out (``heap.space_out_full_collections``). The
baseline starts the same gateway with that step left out. Printed: per read, the median wall
time and the gateway process's CPU over the second half of the reads (the vault is large
then), each side's and the ratio shipped / baseline (below 1: the shipped gateway is faster).
Not part of the test suite; ``make bench`` runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import (
    checkout_on_path,
    codemode_argv,
    contacts,
    execute,
    free_port,
    listening,
    quiet,
)
from process_memory import CLOCK_TICKS

# The gateway with Python's own thresholds: serving leaves them as they are.
BASELINE = (
    "import gc\n"
    "import codemode.gateway.serve as serving\n"
    "serving.space_out_full_collections = gc.get_threshold\n"
    "from codemode.cli.main import run\n"
    "run()\n"
)
SIDES = ("shipped", "baseline")


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` itself has used (not its children: the upstream
    and the sandboxes do the same work on both sides)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@contextlib.contextmanager
def gateway(side: str, directory: Path) -> Iterator[tuple[str, int]]:
    """(URL, pid) of a started gateway of ``side``; stopped on exit."""
    port = free_port()
    argv = codemode_argv(directory, port, False)
    if side == "baseline":
        argv[1:3] = ["-c", BASELINE]  # for ``-m codemode``
    with checkout_on_path(), listening(argv, port, directory / f"{side}.log", 120) as pid:
        yield f"http://127.0.0.1:{port}/mcp", pid


async def read_pages(urls: dict[str, str], pids: dict[str, int], reads: int) -> dict[str, Any]:
    from mcp import Client

    walls: dict[str, list[float]] = {side: [] for side in SIDES}
    cpus: dict[str, list[float]] = {side: [] for side in SIDES}
    async with contextlib.AsyncExitStack() as stack:
        clients = {side: await stack.enter_async_context(Client(urls[side])) for side in SIDES}
        sessions = {
            side: await execute(clients[side], "codemode", "from servers import up\nup.ping()")
            for side in SIDES
        }
        for side in SIDES:
            await quiet(pids[side])
        for _ in range(reads):
            for side in SIDES:  # interleaved: both see the machine as it is
                cpu, started = process_cpu_s(pids[side]), time.perf_counter()
                await execute(clients[side], "codemode", contacts("codemode"), sessions[side])
                walls[side].append((time.perf_counter() - started) * 1000)
                cpus[side].append((process_cpu_s(pids[side]) - cpu) * 1000)
    later = reads // 2
    report: dict[str, Any] = {"reads": reads}
    for side in SIDES:
        report[side] = {
            "wall_ms": statistics.median(walls[side][later:]),
            "cpu_ms": statistics.median(cpus[side][later:]),
            "first_wall_ms": walls[side][0],
        }
    for key in ("wall_ms", "cpu_ms"):
        report[f"{key} ratio"] = report["shipped"][key] / report["baseline"][key]
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reads", type=int, default=20, help="reads of 5,000 new contacts")
    parser.add_argument("--smoke", action="store_true", help="two reads: does it still run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    reads = 2 if args.smoke else args.reads
    with (
        tempfile.TemporaryDirectory() as shipped_dir,
        tempfile.TemporaryDirectory() as baseline_dir,
        gateway("shipped", Path(shipped_dir)) as shipped,
        gateway("baseline", Path(baseline_dir)) as baseline,
    ):
        urls = {"shipped": shipped[0], "baseline": baseline[0]}
        pids = {"shipped": shipped[1], "baseline": baseline[1]}
        report = anyio.run(read_pages, urls, pids, reads)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{reads} reads of 5,000 new contacts in one session (medians of the last {reads // 2})")
    print(f"{'':10} {'read ms':>10} {'gateway CPU ms':>15} {'first read ms':>14}")
    for side in SIDES:
        numbers = report[side]
        print(
            f"{side:10} {numbers['wall_ms']:10.1f} {numbers['cpu_ms']:15.1f} "
            f"{numbers['first_wall_ms']:14.1f}"
        )
    print(
        f"{'ratio':10} {report['wall_ms ratio']:10.3f} {report['cpu_ms ratio']:15.3f}"
        "   (shipped / baseline: below 1, the shipped gateway is faster)"
    )


if __name__ == "__main__":
    main()

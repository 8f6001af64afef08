"""Where a gateway's memory goes: RSS, PSS and USS of each part of `codemode serve`'s tree.

    .venv/bin/python benchmarks/memory.py [--sessions N] [--no-specs] [--cold-index] [--smoke]
                                          [--json]

M1  the gateway process alone, after start, no catalog (one upstream stdio server, peers.py's)
M2  the same gateway's parts: the sandbox template, each warm-pool sandbox (a fork of the
    template, or bwrap and its guest; and the guest alone),
    the upstream server and the tether that runs it
M3  the tree with N idle sessions (default 20, as peers.py's P8), and the mean idle sandbox
M4  the tree once those sessions were released (peers.py's P9: the pool back to its floor)
M5  the gateway process with the three specs of tests/data/specs (search index loaded from the
    cache when built before, else built now), before and after its first search

``--cold-index``: M1 to M4 with an empty cache of vectors (the model's prepared files are
shared), so the gateway embeds its upstream's tools at start, as on a first start or after the
upstream changed; M5 always uses the usual cache (building the three specs' index takes
minutes).

process_memory.py counts the pages: RSS counts a shared page once per process, PSS shares it
out, USS counts private pages only. ``--smoke`` is a quick run (3 sessions, no specs). Not part
of the test suite; memory does not depend on the machine's load, so numbers are comparable
across runs on a busy machine (times are not).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers
from process_memory import PROC, descendants, rollup_kib

# How long the process count must hold still before a tree counts as settled.
SETTLE_S = 6.0


def _command(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")[0].decode()
    except (OSError, UnicodeDecodeError):
        return ""


def _cmdline(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (OSError, UnicodeDecodeError):
        return ""


def _parent(pid: int) -> int:
    try:
        return int((PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _sum(pids: list[int]) -> dict[str, float]:
    rss = pss = uss = 0
    for pid in pids:
        fields = rollup_kib(pid)
        rss += fields.get("Rss", 0)
        pss += fields.get("Pss", 0)
        uss += fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    return {
        "rss": round(rss / 1024, 1),
        "pss": round(pss / 1024, 1),
        "uss": round(uss / 1024, 1),
        "processes": len(pids),
    }


def parts(gateway: int) -> dict[str, Any]:
    """The tree of ``gateway`` split into the gateway, its sandboxes, the template that forks
    them (when one runs) and everything else."""
    tree = descendants(gateway)
    # A sandbox is an outer bwrap (the gateway's child) and everything below it, or a child
    # of the template (the interpreter in a bwrap of its own that forks them) and its own.
    outer = [p for p in tree if _parent(p) == gateway and _command(p).endswith("bwrap")]
    templates = [p for p in outer if "_codemode_guest.template" in _cmdline(p)]
    template = set(templates) | {p for p in tree if _parent(p) in templates}
    forked = [p for p in tree if _parent(p) in template - set(templates)]
    alone = [p for p in outer if p not in templates]
    roots = alone + forked
    sandboxed = set().union(*({p} | descendants(p) for p in roots)) if roots else set()
    others = sorted(tree - sandboxed - template - {gateway})
    sandboxes = _sum(sorted(sandboxed))
    count = max(len(roots), 1)
    guests = _sum(sorted(p for p in sandboxed if not _command(p).endswith("bwrap")))
    # Each stdio server runs under a tether (connectors/tether.py), the gateway's child.
    tethers = [p for p in others if _parent(p) == gateway and "tether" in _cmdline(p)]
    return {
        "gateway": _sum([gateway]),
        "template": _sum(sorted(template)),
        "sandboxes": {**sandboxes, "count": len(roots)},
        "per_sandbox": {k: round(sandboxes[k] / count, 2) for k in ("rss", "pss", "uss")},
        "per_guest": {k: round(guests[k] / count, 2) for k in ("rss", "pss", "uss")},
        "others": _sum(others),
        "tethers": _sum(tethers),
        "tree": _sum(sorted(tree)),
    }


async def settled(pid: int, until: Callable[[int], bool] = lambda _: True) -> dict[str, Any]:
    """``parts(pid)`` once the tree's process count held still for SETTLE_S (and ``until``)."""
    last, since = -1, time.monotonic()
    deadline = time.monotonic() + 300
    while True:
        count = len(descendants(pid))
        if count != last:
            last, since = count, time.monotonic()
        elif until(count) and time.monotonic() - since >= SETTLE_S:
            return parts(pid)
        if time.monotonic() > deadline:
            raise SystemExit(f"the gateway's tree never settled ({count} processes)")
        await anyio.sleep(0.5)


async def first_search(url: str) -> None:
    from mcp import Client

    async with Client(url) as client:
        result = await client.call_tool("search", {"query": "create a customer"})
        assert not result.is_error, result


@contextlib.contextmanager
def cold_cache(directory: Path) -> Iterator[None]:
    """A cache directory of its own for the servers started inside, sharing the model's files."""
    from codemode.search.store import default_cache_dir

    cache = directory / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(default_cache_dir() / "models")
    os.environ["CODEMODE_CACHE_DIR"] = str(cache)
    try:
        yield
    finally:
        del os.environ["CODEMODE_CACHE_DIR"]


async def measure(directory: Path, sessions: int, specs: bool, cold: bool) -> dict[str, Any]:
    peers.SESSIONS = sessions
    stages: dict[str, Any] = {}
    with (
        cold_cache(directory) if cold else contextlib.nullcontext(),
        peers.server("codemode", directory, specs=False) as (url, pid),
    ):
        log = directory / f"codemode-{url.rsplit(':', 1)[1].split('/')[0]}.log"
        stages["started"] = await settled(pid, lambda _: "search index ready" in log.read_text())
        await peers.burst_p95(url, "codemode")
        stages[f"{sessions} idle sessions"] = busy = await settled(pid)
        before = busy["tree"]["processes"]
        stages["released"] = await settled(pid, lambda count: count <= before - sessions)
    if specs:
        with peers.server("codemode", directory, specs=True) as (url, pid):
            stages["3 specs"] = await settled(pid)
            await first_search(url)
            stages["3 specs, searched"] = await settled(pid)
    return stages


def row(name: str, memory: dict[str, float]) -> str:
    extra = f" ({memory['processes']} processes)" if "processes" in memory else ""
    return (
        f"{name:<40} RSS {memory['rss']:6.1f}  PSS {memory['pss']:6.1f}  "
        f"USS {memory['uss']:6.1f} MiB{extra}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=peers.SESSIONS)
    parser.add_argument("--no-specs", action="store_true", help="skip M5")
    parser.add_argument("--cold-index", action="store_true", help="M1-M4 with no cached vectors")
    parser.add_argument("--smoke", action="store_true", help="3 sessions, no specs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sessions = 3 if args.smoke else args.sessions
    with tempfile.TemporaryDirectory(prefix="codemode-memory-") as temporary:
        specs = not (args.no_specs or args.smoke)
        stages = asyncio.run(measure(Path(temporary), sessions, specs, args.cold_index))
    if args.json:
        print(json.dumps(stages))
        return 0
    for stage, split in stages.items():
        print(f"-- {stage}")
        print(row("  gateway process", split["gateway"]))
        if split["template"]["processes"]:
            print(row("  sandbox template (bwrap + interpreter)", split["template"]))
        if split["sandboxes"]["count"]:
            print(row(f"  {split['sandboxes']['count']} sandboxes", split["sandboxes"]))
            print(row("  per sandbox (a fork, or bwrap + guest)", split["per_sandbox"]))
            print(row("  ... of which the guest", split["per_guest"]))
        print(row("  upstream servers (and tethers)", split["others"]))
        print(row("  ... of which the tethers", split["tethers"]))
        print(row("  tree", split["tree"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

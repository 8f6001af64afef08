"""Two codemode gateways side by side, calls interleaved: this tree against another revision.

    .venv/bin/python benchmarks/side_by_side.py [--base REV] [--kinds trivial,call,echo]
                                                [--pairs N] [--batches B] [--json]

On a machine whose speed drifts between runs (a shared VM: the same code's 1 MB echo took 36 ms,
then 50-67 ms a minute later, the machine otherwise idle), two runs one after the other cannot
tell a 5% change from the drift. Here two gateways run at once, one from this tree's ``src``
and one from ``REV``'s (exported with ``git archive`` into a temporary directory; ``--base
WORKTREE`` compares this tree with itself), each behind the same upstream MCP server over
stdio. Every pair of calls goes to both, in alternating order, so whatever the machine does
meanwhile hits both alike.

Kinds (the code of ``benchmarks/peers.py``, through the official MCP client over HTTP):
  trivial  ``print(1)`` in a warm session (peers.py's P2)
  call     one proxied stdio call (P3)
  echo     1 MB of order text through the upstream's ``echo``, privacy on, a new text each
           call (P6)

Per kind: the median of the pairs' ratios (this tree / base: below 1 is faster) in each batch,
their median and spread, and each side's median and fastest call. ``make bench`` compares
with the previous commit (``HEAD~1``; the tree itself where there is none). Not part of the test suite; ``--smoke`` is (this tree
against itself, a few pairs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers  # the benchmark's helpers, next to this file

ROOT = peers.ROOT
WORKTREE = "WORKTREE"
DEFAULT_BASE = "HEAD~1"
KINDS: dict[str, Callable[[str], str]] = {
    "trivial": peers.trivial,
    "call": peers.one_call,
    "echo": peers.echo,
}


def has_revision(revision: str) -> bool:
    """Whether this repository has ``revision`` (a shallow clone has no parent commit)."""
    try:
        found = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
            check=False,
            capture_output=True,
        )
    except OSError:
        return False
    return found.returncode == 0


@contextlib.contextmanager
def source_of(revision: str) -> Iterator[Path]:
    """The ``src`` directory of ``revision`` (this tree's own for ``WORKTREE``)."""
    if revision == WORKTREE:
        yield ROOT / "src"
        return
    with tempfile.TemporaryDirectory(prefix="codemode-base-") as directory:
        archive = Path(directory) / "src.tar"
        try:
            subprocess.run(
                ["git", "-C", str(ROOT), "archive", "--output", str(archive), revision, "src"],
                check=True,
                capture_output=True,
                text=True,
            )
        except (OSError, subprocess.CalledProcessError) as error:
            detail = getattr(error, "stderr", "") or str(error)
            raise SystemExit(
                f"cannot export {revision!r} from {ROOT} with git archive ({detail.strip()}); "
                f"give --base a revision of this repository, or --base {WORKTREE}"
            ) from None
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.11.4 on
                tar.extractall(directory, filter="data")
            else:  # pragma: no cover - git's own archive of this repository
                tar.extractall(directory)
        yield Path(directory) / "src"


@contextlib.contextmanager
def gateway(src: Path, directory: Path) -> Iterator[str]:
    """The URL of a codemode gateway run from ``src``, configured in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    port = peers.free_port()
    argv = peers.codemode_argv(directory, port, specs=False)
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), before]))
    try:
        started = peers.listening(argv, port, directory / "gateway.log", 120)
        started.__enter__()
    finally:  # the child has its environment: the parent's goes back at once
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        started.__exit__(None, None, None)


async def compare(
    urls: tuple[str, str], kinds: list[str], pairs: int, batches: int
) -> list[dict[str, Any]]:
    """Per kind, ``batches`` of ``pairs`` interleaved calls to (base, this)."""
    from mcp import Client

    rows = []
    async with Client(urls[0]) as base, Client(urls[1]) as this:
        clients = (base, this)
        handles = [
            await peers.execute(client, "codemode", "from servers import up\nup.ping()")
            for client in clients
        ]
        for kind in kinds:
            code_of = KINDS[kind]
            for _ in range(3):  # warm both
                for client, handle in zip(clients, handles, strict=True):
                    await peers.execute(client, "codemode", code_of("codemode"), handle)
            times: tuple[list[float], list[float]] = ([], [])
            batch_ratios = []
            for _ in range(batches):
                ratios = []
                for index in range(pairs):
                    order = (0, 1) if index % 2 == 0 else (1, 0)
                    pair = [0.0, 0.0]
                    for side in order:
                        started = time.perf_counter()
                        await peers.execute(
                            clients[side], "codemode", code_of("codemode"), handles[side]
                        )
                        pair[side] = (time.perf_counter() - started) * 1000
                    times[0].append(pair[0])
                    times[1].append(pair[1])
                    ratios.append(pair[1] / pair[0])
                batch_ratios.append(statistics.median(ratios))
            rows.append(
                {
                    "kind": kind,
                    "ratio": round(statistics.median(batch_ratios), 3),
                    "spread": [round(min(batch_ratios), 3), round(max(batch_ratios), 3)],
                    "base_p50_ms": round(statistics.median(times[0]), 3),
                    "this_p50_ms": round(statistics.median(times[1]), 3),
                    "base_min_ms": round(min(times[0]), 3),
                    "this_min_ms": round(min(times[1]), 3),
                    "pairs": pairs * batches,
                }
            )
    return rows


def line(row: dict[str, Any]) -> str:
    spread = "{:.3f}-{:.3f}".format(*row["spread"])
    return (
        f"{row['kind']:<8} {row['ratio']:>6.3f} {spread:>13}   "
        f"{row['base_p50_ms']:>8.2f} {row['this_p50_ms']:>8.2f}   "
        f"{row['base_min_ms']:>8.2f} {row['this_min_ms']:>8.2f}   {row['pairs']}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help=f"a git revision, or {WORKTREE} (default: {DEFAULT_BASE})")
    parser.add_argument("--kinds", default="trivial,call,echo")
    parser.add_argument("--pairs", type=int, default=60, help="interleaved pairs per batch")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="this tree against itself, briefly")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.base, args.kinds, args.pairs, args.batches = WORKTREE, "trivial,call", 2, 1
    elif args.base is None:
        args.base = DEFAULT_BASE if has_revision(DEFAULT_BASE) else WORKTREE
        if args.base == WORKTREE:
            print(f"no {DEFAULT_BASE} here (a shallow clone?): this tree against itself")
    kinds = [kind.strip() for kind in args.kinds.split(",") if kind.strip()]
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown or not kinds or args.pairs < 1 or args.batches < 1:
        parser.error(f"--kinds takes some of {', '.join(KINDS)}; --pairs and --batches >= 1")
    directory = Path(tempfile.mkdtemp(prefix="codemode-side-by-side-"))
    try:
        with (
            source_of(args.base) as base_src,
            gateway(base_src, directory / "base") as base_url,
            gateway(ROOT / "src", directory / "this") as this_url,
        ):
            rows = anyio.run(compare, (base_url, this_url), kinds, args.pairs, args.batches)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        print(json.dumps({"base": args.base, "rows": rows}, indent=2))
        return 0
    print(
        f"this tree against {args.base}, calls interleaved; ratio = this / base (below 1: faster)"
    )
    print(
        f"{'kind':<8} {'ratio':>6} {'spread':>13}   {'base p50':>8} {'this p50':>8}   "
        f"{'base min':>8} {'this min':>8}   pairs (ms)"
    )
    for row in rows:
        print(line(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

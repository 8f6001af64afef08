"""Every benchmark ``make bench`` runs still runs: each once, in its tiny ``--smoke`` mode.

Nothing is timed or compared here (timings belong to ``make bench``): a benchmark that no
longer starts, or whose own checks fail, fails its test. The quick runs start together, three
at a time, as soon as the first of them is needed: they wait on subprocesses and sandboxes
more than they compute, so the set costs about as long as its slowest few.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
# Modules the benchmarks import or start, not benchmarks themselves (and the agent suite's
# tasks, world and servers: ``agent/bench_*.py``).
HELPERS = {"burst_client.py", "peers_servers.py", "process_memory.py", "search_eval.py"}
# Benchmarks that start a Ray cluster (tens of seconds before the first number): run on their
# own, marked slow.
RAY = {"cluster.py", "scale.py"}
# What tests/cluster/conftest.py's wait_for says when a local Ray node does not start in time.
RAY_START_TIMEOUT = "did not happen within"
THIRD_PARTY = {"gateway.py", "agent/run.py"}
WAIT_S = 300


def make_bench() -> list[str]:
    """The benchmarks the Makefile's ``bench`` target runs, in its order."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    target = re.search(r"^bench:.*\n((?:\t.*\n)+)", text, re.MULTILINE)
    assert target is not None, "the Makefile has no bench target"
    return re.findall(r"benchmarks/(\S+\.py)", target.group(1))


def cases() -> Iterator[object]:
    for name in make_bench():
        marks = []
        if name in RAY:
            marks += [pytest.mark.slow, pytest.mark.timeout(WAIT_S * 2)]
        if name in THIRD_PARTY:
            marks.append(pytest.mark.thirdparty)
        yield pytest.param(name, id=name, marks=marks)


def why_not(name: str) -> str | None:
    """Why ``name`` cannot run here (None: it can)."""
    if name == "peers.py" and importlib.util.find_spec("fastmcp") is None:
        return "needs the bench extra (FastMCP): pip install -e '.[bench]'"
    if name == "search_int8.py":
        from codemode.search.encoder import INSTALL_HINT, semantic_available

        if not semantic_available():
            if os.environ.get("CODEMODE_EXPECT_MODEL") == "1":
                pytest.fail(
                    f"CODEMODE_EXPECT_MODEL=1 but the embedding model is missing: {INSTALL_HINT}"
                )
            return f"needs the embedding model ({INSTALL_HINT})"
    return None


def smoke(name: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / name), "--smoke"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=WAIT_S,
    )


@pytest.fixture(scope="module")
def quick_runs(
    request: pytest.FixtureRequest,
) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """The selected quick benchmarks, started together (three at a time)."""
    selected = [
        item.callspec.params["name"]
        for item in request.session.items
        if item.module is not None
        and item.module.__name__ == __name__
        and hasattr(item, "callspec")
        and "name" in item.callspec.params
    ]
    with ThreadPoolExecutor(3) as pool:
        yield {
            name: pool.submit(smoke, name)
            for name in selected
            if name not in RAY and why_not(name) is None
        }


@pytest.mark.parametrize("name", list(cases()))
def test_the_benchmark_still_runs(
    name: str, quick_runs: dict[str, Future[subprocess.CompletedProcess[str]]]
) -> None:
    reason = why_not(name)
    if reason is not None:
        pytest.skip(reason)
    if name in RAY:
        # A Ray cluster starting beside three other benchmarks on two cores can miss its
        # workers' join deadline: the quick ones finish first.
        wait(quick_runs.values(), timeout=WAIT_S)
        done = smoke(name)
        if done.returncode != 0 and RAY_START_TIMEOUT in done.stderr:
            # Seen twice in CI: a local Ray node that missed its start deadline (the head, a
            # worker). That is the cluster's start on a busy machine, not the benchmark's
            # code, which a second run checks just the same; any other failure fails at once.
            done = smoke(name)
    else:
        done = quick_runs[name].result(timeout=WAIT_S)
    assert done.returncode == 0, (
        f"benchmarks/{name} --smoke failed ({done.returncode}):\n"
        f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )


def test_make_bench_runs_every_benchmark_in_benchmarks() -> None:
    found = {
        str(path.relative_to(BENCHMARKS))
        for path in BENCHMARKS.rglob("*.py")
        if ".cache" not in path.parts
    }
    listed = set(make_bench())
    assert not listed - found, f"make bench names missing files: {sorted(listed - found)}"
    orphans = sorted(
        name for name in found - listed - HELPERS if not name.startswith("agent/bench_")
    )
    assert not orphans, (
        f"{orphans} are in benchmarks/ but not in make bench: add them to the bench target "
        "(with a --smoke mode), list them in HELPERS if other benchmarks import them, or move a "
        "finished experiment to research/"
    )

"""Cold command-line timings: ``codemode --help`` and ``codemode search`` over the three real
specs (3,224 operations) from a fresh process, process start included.

    python benchmarks/cold_cli.py [--runs 15] [--cache-dir DIR] [--no-semantic] [--json]

Each round runs every row once, interleaved, as its own process (the way a person or a script
calls it: ``from codemode.cli.main import run; run()``, as the ``codemode`` script does); rows
report the median wall time and the median CPU time (user + system of the child, from wait4:
less disturbed by other load on a shared machine) and both as ratios to ``python -c pass`` in
the same rounds. The search rows use a stored index (the first search builds it: minutes of
embedding on a first run):

- ``search, in process``: ``--no-daemon``: imports numpy and the tokenizer, loads the model;
- ``search, daemon running``: the per-user search daemon answers (what every search after the
  first in 10 minutes costs);
- ``search, starts the daemon``: no daemon yet: this call starts it in the background and
  answers in its own process without waiting for it (the daemon loads once this answer is out),
  so it costs what ``--no-daemon`` does plus starting a process (last in each round, after
  stopping the daemon; the daemon it starts answers the next round).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPECS = HERE.parent / "tests" / "data" / "specs"
SPEC_FILES = (
    "cloudflare-openapi-2024-08-06.json.gz",
    "github-api.github.com-octokit-openapi-23.0.2.json.gz",
    "stripe-spec3-2023-09-12.json.gz",
)
CLI = ["-c", "from codemode.cli.main import run; run()"]
QUERY = "give a customer their money back"


def timed(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(wall ms, child CPU ms) of one process."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, *argv], env=env, cwd=cwd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = (time.perf_counter() - start) * 1000
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{argv} exited with {process.returncode}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def starting(run_dir: Path) -> bool:
    """Whether a daemon start is under way (its starter's lock, held until it listens)."""
    for path in run_dir.glob("s-*.lock"):
        with path.open("rb") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
    return False


def wait_for_starts(run_dir: Path) -> None:
    deadline = time.monotonic() + 120
    while starting(run_dir) and time.monotonic() < deadline:
        time.sleep(0.05)


def ask(path: Path, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as connection:
        connection.settimeout(10)
        connection.connect(str(path))
        connection.sendall(request + b"\n")
        return connection.recv(1000)


def running(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def stop_daemons(run_dir: Path) -> None:
    """Stop the daemons in ``run_dir`` and wait until their processes are gone (one still exiting
    would slow the next row down)."""
    wait_for_starts(run_dir)
    pids = []
    for path in run_dir.glob("s-*.sock"):
        try:
            pids.append(int(json.loads(ask(path, b'{"op": "ping"}'))["pid"]))
            ask(path, b'{"op": "stop"}')
        except (OSError, ValueError, KeyError):
            continue
    deadline = time.monotonic() + 30
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--no-semantic", action="store_true")
    parser.add_argument(
        "--smoke", action="store_true", help="one run, one spec, lexical: does it still run"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    spec_files = SPEC_FILES[-1:] if args.smoke else SPEC_FILES
    if args.smoke:
        args.runs, args.no_semantic = 1, True
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(HERE.parent / "src") + os.pathsep + env.get("PYTHONPATH", "")
    if args.cache_dir is not None:
        env["CODEMODE_CACHE_DIR"] = str(args.cache_dir)
    env.pop("CODEMODE_SEARCH_DAEMON", None)
    openapi = [arg for name in spec_files for arg in ("--openapi", str(SPECS / name))]
    search = [*CLI, "search", "--json", "--limit", "5", *openapi, QUERY]
    search += ["--no-semantic"] if args.no_semantic else []
    with tempfile.TemporaryDirectory(prefix="cm-bench-") as work:
        env["CODEMODE_STATE_DIR"] = str(Path(work) / "state")
        run_dir = Path(work) / "run"
        env["CODEMODE_RUNTIME_DIR"] = str(run_dir)
        print(
            "warming up: the first search stores the index (minutes on a first run)...",
            file=sys.stderr,
        )
        first_wall, _ = timed([*search, "--no-daemon"], env, work)
        rows = {
            "python -c pass": ["-c", "pass"],
            "codemode --help": [*CLI, "--help"],
            "search, in process (--no-daemon)": [*search, "--no-daemon"],
            "search, daemon running": search,
        }
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
        samples["search, starts the daemon"] = []
        try:
            timed(search, env, work)  # starts the daemon for the first round
            wait_for_starts(run_dir)
            for _ in range(args.runs):
                for name, argv in rows.items():
                    samples[name].append(timed(argv, env, work))
                stop_daemons(run_dir)
                samples["search, starts the daemon"].append(timed(search, env, work))
                wait_for_starts(run_dir)  # its daemon answers in the next round
        finally:
            stop_daemons(run_dir)
    base_wall = statistics.median(w for w, _ in samples["python -c pass"])
    base_cpu = statistics.median(c for _, c in samples["python -c pass"])
    report = {
        "load_average": os.getloadavg(),
        "first_search_s": round(first_wall / 1000, 2),
        "rows": {
            name: {
                "wall_ms": round(statistics.median(w for w, _ in values), 1),
                "cpu_ms": round(statistics.median(c for _, c in values), 1),
                "wall_ratio": round(statistics.median(w for w, _ in values) / base_wall, 2),
                "cpu_ratio": round(statistics.median(c for _, c in values) / base_cpu, 2),
                "runs": len(values),
            }
            for name, values in samples.items()
        },
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"load average at end {report['load_average']}; first search {report['first_search_s']} s"
    )
    print(f"{'':<36} {'wall ms':>9} {'cpu ms':>8} {'wall/py':>8} {'cpu/py':>7}  (medians)")
    for name, row in report["rows"].items():
        print(
            f"{name:<36} {row['wall_ms']:>9.1f} {row['cpu_ms']:>8.1f} {row['wall_ratio']:>8.2f}"
            f" {row['cpu_ratio']:>7.2f}"
        )


if __name__ == "__main__":
    main()

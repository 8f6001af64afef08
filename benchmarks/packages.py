"""Packages on demand: installing a cached wheel into a session, against an empty execution.

    .venv/bin/python benchmarks/packages.py [--rounds N] [--json]

K1  `packages.install(["tinylib"])` + import in a fresh session, the wheel already in the store
    (target <= 300 ms for the install)
K2  `pass` in a fresh session: the baseline (sandbox start and one execution)
K3  the first install (uv resolves and downloads from a local index on 127.0.0.1)

Medians of ``--rounds`` rounds, isolation on (bubblewrap), in one process.
"""

from __future__ import annotations

import argparse
import http.server
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "packages"))

from package_index import Index, build_wheel

from codemode.bridge.host import ToolAccess
from codemode.sandbox import BwrapBackend, SandboxPool, SandboxSession, SandboxSettings
from codemode.sandbox.packages import PackageInstaller, SandboxPackages
from codemode.settings.sandbox import PackageSettings

INSTALL = "packages.install(['tinylib'], quiet=True)\nimport tinylib"


def serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/simple"


def measure(rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="codemode-bench-packages-") as work:
        return measure_in(Path(work), rounds)


def measure_in(work: Path, rounds: int) -> dict[str, Any]:
    (work / "index").mkdir()
    server, url = serve(work / "index")
    index = Index(work / "index", url)
    build_wheel(index.files, "tinylib", "1.0", "VALUE = 42\n")
    index.add(index.files, "tinylib")
    settings = PackageSettings(enabled=True, index_url=url, cache_dir=str(work / "cache"))
    access = ToolAccess(packages=SandboxPackages(PackageInstaller(settings, work / "cache")))
    backend = BwrapBackend(SandboxSettings(packages=settings, pool_size=1))
    samples: dict[str, list[float]] = {"cached": [], "baseline": [], "first": []}
    try:
        with SandboxPool(backend, size=1) as pool:
            for round_ in range(rounds + 1):
                for name, code in (("baseline", "pass"), ("cached", INSTALL)):
                    session = SandboxSession(pool)
                    session.execute("pass")  # started: time the execution only
                    started = time.perf_counter()
                    result = session.execute(code, tools=access)
                    elapsed = (time.perf_counter() - started) * 1000
                    assert result.status == "ok", result.render_text()
                    session.close()
                    if round_ == 0 and name == "cached":
                        samples["first"].append(elapsed)  # the store was empty
                    elif round_ > 0:
                        samples[name].append(elapsed)
    finally:
        server.shutdown()
        server.server_close()
    numbers = {name: round(statistics.median(v), 1) for name, v in samples.items()}
    numbers["install_over_baseline_ms"] = round(numbers["cached"] - numbers["baseline"], 1)
    return numbers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="one round: does it still run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 1
    numbers = measure(args.rounds)
    if args.json:
        print(json.dumps(numbers))
        return 0
    print(f"K1 cached wheel: install + import        {numbers['cached']:.1f} ms  (target <= 300)")
    print(f"K2 empty execution (baseline)             {numbers['baseline']:.1f} ms")
    print(f"   the install's own share                {numbers['install_over_baseline_ms']:.1f} ms")
    print(f"K3 first install from the local index    {numbers['first']:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

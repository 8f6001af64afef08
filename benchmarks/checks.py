"""The call check's cost: 100 lines of agent code against the 3,224 operations of the real specs.

    .venv/bin/python benchmarks/checks.py [--smoke]

Prints the median time to check the code (target <= 2 ms for 100 lines), beside the time to
compile the same code (the floor any pre-run check pays), and the one-off table build.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from codemode.catalog.loading import server_name_for_spec
from codemode.checks import SignatureTable, check_calls
from codemode.connectors.openapi import load_spec, operations_to_specs

SPECS = Path(__file__).resolve().parent.parent / "tests" / "data" / "specs"


def agent_code(table: SignatureTable, lines: int) -> str:
    """Realistic code: imports, loops, prints, and a correct call every other line."""
    package = "github" if "github" in table.servers else sorted(table.servers)[0]
    calls = [
        (name, signature)
        for name, signature in sorted(table.servers[package].items())
        if signature.required
    ][: lines // 2]
    body = [f"from servers import {package}", "results = []"]
    for name, signature in calls:
        arguments = ", ".join(
            f"{param}={literal(signature.params[param].types)}" for param in signature.required
        )
        body.append(f"results.append({package}.{name}({arguments}))")
        body.append("print(len(results))")
    return "\n".join(body[:lines]) + "\n"


def literal(types: frozenset[str]) -> str:
    for kind, text in (("string", "'x'"), ("integer", "1"), ("number", "1.5"), ("boolean", "True")):
        if kind in types:
            return text
    return "{}"


def median_ms(function: object, repeat: int = 200) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()  # type: ignore[operator]
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--smoke", action="store_true", help="the smallest spec, few repeats: does it still run"
    )
    smoke = parser.parse_args().smoke
    paths = sorted(SPECS.glob("*.json.gz"))
    if smoke:
        paths = [min(paths, key=lambda path: path.stat().st_size)]
    repeat = 3 if smoke else 200
    specs = []
    for path in paths:
        specs.extend(operations_to_specs(server_name_for_spec(path), load_spec(path)))
    started = time.perf_counter()
    table = SignatureTable.from_specs(specs)
    build_ms = (time.perf_counter() - started) * 1000
    code = agent_code(table, 100)
    assert check_calls(code, table) == [], "the benchmark's calls must be correct"
    check = median_ms(lambda: check_calls(code, table), repeat)
    compile_only = median_ms(lambda: compile(code, "<code>", "exec"), repeat)
    print(f"operations: {len(specs):,}; code: {code.count(chr(10))} lines")
    print(f"check 100 lines            {check:.3f} ms  (target <= 2 ms)")
    print(
        f"compile the same (floor)   {compile_only:.3f} ms  -> check / compile {check / compile_only:.2f}x"
    )
    print(f"signature table, built once per catalog version: {build_ms:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

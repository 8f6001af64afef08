"""Large results over stdio: codemode's transport beside the MCP SDK's ``stdio_client``, with
the same server, the same client, in the same run. Medians of repeated calls; ratios.

    .venv/bin/python benchmarks/stdio_reader.py [--rounds 7] [--json] [--smoke]

A real MCP Python SDK server returns a string of 1 MB and of 10 MB; each call is timed from the
client's ``call_tool`` to its result. The SDK's reader joins and splits its whole buffer again
on every 64 KiB read (quadratic in the message); codemode's scans each byte once.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio

SERVER = textwrap.dedent(
    """
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("big")

    @server.tool()
    def make(megabytes: int) -> str:
        '''A string of this many megabytes.'''
        return "0123456789abcdef" * (megabytes << 16)

    server.run()
    """
)


async def _time_calls(client: Any, megabytes: int, rounds: int) -> float:
    durations = []
    for _ in range(rounds):
        started = time.perf_counter()
        result = await client.call_tool("make", {"megabytes": megabytes})
        durations.append((time.perf_counter() - started) * 1000)
        assert not result.is_error and len(result.content[0].text) == megabytes << 20
    return statistics.median(durations)


async def _measure(script: Path, sizes: list[int], rounds: int) -> dict[str, dict[str, float]]:
    from mcp import Client, StdioServerParameters

    from codemode.connectors.mcp_transport import child_environment
    from codemode.connectors.stdio_transport import stdio_transport

    def sdk() -> Any:
        return StdioServerParameters(command=sys.executable, args=[str(script)])

    def ours() -> Any:
        return stdio_transport(sys.executable, [str(script)], env=child_environment({}))

    table: dict[str, dict[str, float]] = {}
    for size in sizes:
        row: dict[str, list[float]] = {"sdk": [], "codemode": []}
        # Alternated, so that noise on the machine falls on both.
        for _ in range(2):
            for name, target in (("sdk", sdk), ("codemode", ours)):
                async with Client(target()) as client:
                    await client.call_tool("make", {"megabytes": 1})  # warm both ends
                    row[name].append(await _time_calls(client, size, rounds))
        table[f"{size} MB"] = {name: statistics.median(values) for name, values in row.items()}
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7, help="calls per size and transport")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="1 MB, one call: does it still run")
    args = parser.parse_args(argv)
    sizes, rounds = ([1], 1) if args.smoke else ([1, 10], args.rounds)
    with tempfile.TemporaryDirectory(prefix="codemode-stdio-bench-") as tmp:
        script = Path(tmp) / "big.py"
        script.write_text(SERVER)
        table = anyio.run(_measure, script, sizes, rounds)
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    print(f"{'result':>8} {'SDK stdio_client':>18} {'codemode':>10} {'ratio':>7}  (ms, median)")
    for size, row in table.items():
        ratio = row["codemode"] / row["sdk"]
        print(f"{size:>8} {row['sdk']:>18.1f} {row['codemode']:>10.1f} {ratio:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

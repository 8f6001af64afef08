"""Gateway benchmarks over streamable HTTP, beside baselines measured in the same run.

    .venv/bin/python benchmarks/gateway.py [--quick] [--smoke] [--json]

G1  `execute` of print(1) in a warm session, end to end through the official MCP client
    (p50/p95). Baseline: a one-line tool of an official-SDK MCPServer over streamable HTTP
    (the transport's floor).
G2  a call from sandbox code to a tool of an upstream stdio MCP server, timed inside the
    sandbox (p50/p95): server-everything's echo and the demo docs server. Baseline: the same
    tool called directly with the official client over stdio, no codemode in between.
G3  20 concurrent sessions (20 clients), each running a short script with two tool calls to
    two upstreams, then reading its own state back: errors and crosstalk must be zero.

Every figure is the median over repeated rounds. Needs `make third-party` (server-everything).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from codemode.demo import server_commands

ROOT = Path(__file__).resolve().parents[1]
EVERYTHING = ROOT / "third_party" / "node_modules" / ".bin" / "mcp-server-everything"

BASELINE_SERVER = """\
import sys
import uvicorn
from mcp.server import MCPServer

server = MCPServer("baseline")

@server.tool()
def one() -> str:
    return "1"

uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[1]),
            log_level="warning")
"""

# Runs inside the sandbox: N calls of one upstream tool, each timed with perf_counter.
INSIDE = """\
import time
from servers import {server}
for _ in range(20):
    {call}
lat = []
for _ in range({n}):
    t = time.perf_counter()
    {call}
    lat.append(time.perf_counter() - t)
lat.sort()
print(lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.95)] * 1e3)
"""

UPSTREAM_CALLS = {
    "everything.echo": ("everything", "echo", {"message": "x"}),
    "docs.list_documents": ("docs", "list_documents", {"limit": 1}),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


@contextlib.contextmanager
def http_process(argv: list[str], port: int, log: Path) -> Any:
    """A server subprocess, ready once its port accepts (bounded poll); stopped on exit."""
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 90
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=0.05)
            if process.returncode is not None:
                raise SystemExit(f"{argv[:4]} exited early:\n{log.read_text()[-3000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    message = f"{argv[:4]} did not listen:\n{log.read_text()[-3000:]}"
                    raise SystemExit(message) from None
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)


def write_config(directory: Path) -> Path:
    commands = {
        "docs": server_commands(directory / "data")["docs"],
        "crm": server_commands(directory / "data")["crm"],
        "everything": [str(EVERYTHING)],
    }
    lines = []
    for name, (command, *args) in commands.items():
        lines += [f"[servers.{name}]", f"command = {json.dumps(command)}"]
        lines += [f"args = {json.dumps(args)}", ""]
    lines += ["[sandbox]", "pool_size = 2", ""]
    lines += ["[gateway]", f'state_dir = "{directory / "state"}"', "max_sessions = 64", ""]
    path = directory / "codemode.toml"
    path.write_text("\n".join(lines))
    return path


async def timed_calls(call: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        out.append(time.perf_counter() - start)
    return out


async def execute(client: Any, code: str, session: str | None = None) -> dict[str, Any]:
    arguments: dict[str, Any] = {"code": code}
    if session:
        arguments["session"] = session
    result = await client.call_tool("execute", arguments)
    data = result.structured_content or {}
    if result.is_error or data.get("status") != "ok":
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        raise RuntimeError(f"execute failed: {text}")
    return dict(data)


# --- G1 ----------------------------------------------------------------------------------------


async def g1_execute(url: str, rounds: int, n: int) -> dict[str, float]:
    from mcp import Client

    p50s, p95s = [], []
    async with Client(url) as client:
        session = (await execute(client, "print(1)"))["session"]

        async def once() -> None:
            data = await execute(client, "print(1)", session)
            assert data["stdout"] == "1\n"

        await timed_calls(once, 20)
        for _ in range(rounds):
            samples = await timed_calls(once, n)
            p50s.append(statistics.median(samples) * 1e3)
            p95s.append(percentile(samples, 0.95) * 1e3)
    return {"p50_ms": statistics.median(p50s), "p95_ms": statistics.median(p95s)}


async def g1_baseline(url: str, rounds: int, n: int) -> dict[str, float]:
    from mcp import Client

    p50s, p95s = [], []
    async with Client(url) as client:

        async def once() -> None:
            result = await client.call_tool("one", {})
            assert not result.is_error

        await timed_calls(once, 20)
        for _ in range(rounds):
            samples = await timed_calls(once, n)
            p50s.append(statistics.median(samples) * 1e3)
            p95s.append(percentile(samples, 0.95) * 1e3)
    return {"p50_ms": statistics.median(p50s), "p95_ms": statistics.median(p95s)}


async def g1_raw(url: str, tool: str, arguments: dict[str, Any], rounds: int, n: int) -> Any:
    """The same call as a hand-written 2026-07-28 request over one keep-alive connection."""
    import httpx2

    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    def body(args: dict[str, Any]) -> bytes:
        params = {"name": tool, "arguments": args, "_meta": meta}
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})

    p50s, p95s = [], []
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        answer = (await http.post(url, content=body(arguments))).json()["result"]
        if tool == "execute":
            arguments = {**arguments, "session": answer["structuredContent"]["session"]}
        payload = body(arguments)

        async def once() -> None:
            result = (await http.post(url, content=payload)).json()["result"]
            assert not result.get("isError"), result

        await timed_calls(once, 20)
        for _ in range(rounds):
            samples = await timed_calls(once, n)
            p50s.append(statistics.median(samples) * 1e3)
            p95s.append(percentile(samples, 0.95) * 1e3)
    return {"p50_ms": statistics.median(p50s), "p95_ms": statistics.median(p95s)}


# --- G2 ----------------------------------------------------------------------------------------


async def g2_inside(url: str, rounds: int, n: int) -> dict[str, dict[str, float]]:
    from mcp import Client

    out: dict[str, dict[str, float]] = {}
    async with Client(url) as client:
        session = None
        for label, (server, tool, arguments) in UPSTREAM_CALLS.items():
            args = ", ".join(f"{key}={value!r}" for key, value in arguments.items())
            code = INSIDE.format(server=server, call=f"{server}.{tool}({args})", n=n)
            p50s, p95s = [], []
            for _ in range(rounds):
                data = await execute(client, code, session)
                session = data["session"]
                p50, p95 = (float(x) for x in data["stdout"].split())
                p50s.append(p50)
                p95s.append(p95)
            out[label] = {"p50_ms": statistics.median(p50s), "p95_ms": statistics.median(p95s)}
    return out


async def g2_direct(data_dir: Path, rounds: int, n: int) -> dict[str, dict[str, float]]:
    from mcp import Client, StdioServerParameters

    argv = {"everything": [str(EVERYTHING)], "docs": server_commands(data_dir)["docs"]}
    out: dict[str, dict[str, float]] = {}
    for label, (server, tool, arguments) in UPSTREAM_CALLS.items():
        command, *args = argv[server]
        async with Client(StdioServerParameters(command=command, args=args)) as client:

            async def once(tool: str = tool, arguments: dict[str, Any] = arguments) -> None:
                result = await client.call_tool(tool, arguments)
                assert not result.is_error

            await timed_calls(once, 20)
            p50s, p95s = [], []
            for _ in range(rounds):
                samples = await timed_calls(once, n)
                p50s.append(statistics.median(samples) * 1e3)
                p95s.append(percentile(samples, 0.95) * 1e3)
        out[label] = {"p50_ms": statistics.median(p50s), "p95_ms": statistics.median(p95s)}
    return out


# --- G3 ----------------------------------------------------------------------------------------

SESSION_SCRIPT = """\
import hashlib
from servers import crm, everything
marker = "{marker}"
echo = everything.echo(message=marker)
lead = crm.get_lead(lead_id="{lead}")
digest = hashlib.sha256(marker.encode()).hexdigest()[:16]
print(marker, digest, lead["id"], marker in str(echo))
"""


async def g3_concurrent(url: str, sessions: int) -> dict[str, Any]:
    from mcp import Client

    errors: list[str] = []
    crosstalk: list[str] = []
    latencies: list[float] = []

    async def one(index: int) -> None:
        marker = f"S{index:02d}-{secrets.token_hex(4)}"
        lead = f"LEAD-{index + 1:04d}"
        digest = hashlib.sha256(marker.encode()).hexdigest()[:16]
        try:
            started = time.perf_counter()
            async with Client(url) as client:
                first = await execute(client, SESSION_SCRIPT.format(marker=marker, lead=lead))
                second = await execute(client, "print(marker, digest)", first["session"])
            latencies.append(time.perf_counter() - started)
        except Exception as error:  # noqa: BLE001 - counted and reported
            errors.append(f"{marker}: {error}"[:300])
            return
        if first["stdout"] != f"{marker} {digest} {lead} True\n":
            crosstalk.append(f"{marker}: {first['stdout']!r}")
        if second["stdout"] != f"{marker} {digest}\n":
            crosstalk.append(f"{marker} (state): {second['stdout']!r}")

    started = time.perf_counter()
    with anyio.fail_after(300):
        async with anyio.create_task_group() as group:
            for index in range(sessions):
                group.start_soon(one, index)
    wall = time.perf_counter() - started
    return {
        "sessions": sessions,
        "errors": errors,
        "crosstalk": crosstalk,
        "wall_s": wall,
        "per_session_p50_s": statistics.median(latencies) if latencies else float("nan"),
    }


# --- main ----------------------------------------------------------------------------------------


async def run(quick: bool, smoke: bool = False) -> dict[str, Any]:
    rounds, n = (1, 2) if smoke else (3, 50) if quick else (7, 200)
    concurrent = 2 if smoke else 20
    with tempfile.TemporaryDirectory(prefix="codemode-bench-gateway-") as tmp:
        directory = Path(tmp)
        config = write_config(directory)
        port, baseline_port = free_port(), free_port()
        baseline_script = directory / "baseline_server.py"
        baseline_script.write_text(BASELINE_SERVER)
        gateway_argv = [sys.executable, "-m", "codemode", "serve", "--config", str(config)]
        gateway_argv += ["--transport", "http", "--port", str(port)]
        # Like the baseline server, no authentication (loopback, this run only): anonymous
        # clients also get a session each, which G3 counts on.
        gateway_argv += ["--insecure-allow-anonymous"]
        url = f"http://127.0.0.1:{port}/mcp"
        numbers: dict[str, Any] = {"rounds": rounds, "calls_per_round": n}
        with http_process(gateway_argv, port, directory / "gateway.log") as gateway:
            print(f"gateway pid {gateway.pid} on {url}", file=sys.stderr)
            numbers["g1"] = await g1_execute(url, rounds, n)
            numbers["g1_raw"] = await g1_raw(url, "execute", {"code": "print(1)"}, rounds, n)
            numbers["g2"] = await g2_inside(url, rounds, n * 2)
            g3 = [await g3_concurrent(url, concurrent) for _ in range(1 if quick or smoke else 3)]
        with http_process(
            [sys.executable, str(baseline_script), str(baseline_port)],
            baseline_port,
            directory / "baseline.log",
        ):
            baseline_url = f"http://127.0.0.1:{baseline_port}/mcp"
            numbers["g1_baseline"] = await g1_baseline(baseline_url, rounds, n)
            numbers["g1_raw_baseline"] = await g1_raw(baseline_url, "one", {}, rounds, n)
        numbers["g2_direct"] = await g2_direct(directory / "data", rounds, n)
        numbers["g3"] = {
            "rounds": len(g3),
            "sessions": concurrent,
            "errors": sum(len(r["errors"]) for r in g3),
            "crosstalk": sum(len(r["crosstalk"]) for r in g3),
            "wall_s": statistics.median(r["wall_s"] for r in g3),
            "per_session_p50_s": statistics.median(r["per_session_p50_s"] for r in g3),
            "examples": [e for r in g3 for e in r["errors"] + r["crosstalk"]][:5],
        }
    return numbers


def table(numbers: dict[str, Any]) -> str:
    g1, base = numbers["g1"], numbers["g1_baseline"]
    raw, raw_base = numbers["g1_raw"], numbers["g1_raw_baseline"]
    rows = [
        (
            "G1 execute print(1), warm session, HTTP",
            f"p50 {g1['p50_ms']:.2f} / p95 {g1['p95_ms']:.2f} ms",
            "p50 <= 3 ms",
            f"SDK MCPServer trivial tool, same client: p50 {base['p50_ms']:.2f} / "
            f"p95 {base['p95_ms']:.2f} ms",
        ),
        (
            "G1 the same, raw HTTP request (httpx2)",
            f"p50 {raw['p50_ms']:.2f} / p95 {raw['p95_ms']:.2f} ms",
            "p50 <= 3 ms",
            f"SDK MCPServer trivial tool, raw: p50 {raw_base['p50_ms']:.2f} / "
            f"p95 {raw_base['p95_ms']:.2f} ms",
        ),
    ]
    for label, inside in numbers["g2"].items():
        direct = numbers["g2_direct"][label]
        rows.append(
            (
                f"G2 {label} from sandbox code",
                f"p50 {inside['p50_ms']:.3f} / p95 {inside['p95_ms']:.3f} ms",
                "p50 <= 1 ms",
                f"official client direct over stdio: p50 {direct['p50_ms']:.3f} / "
                f"p95 {direct['p95_ms']:.3f} ms",
            )
        )
    g3 = numbers["g3"]
    rows.append(
        (
            "G3 20 concurrent sessions (2 tool calls + state)",
            f"errors {g3['errors']}, crosstalk {g3['crosstalk']}",
            "0 and 0",
            f"batch wall {g3['wall_s']:.2f} s; per session p50 {g3['per_session_p50_s']:.2f} s "
            f"(client start, 2 executes)",
        )
    )
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    header = ("benchmark", "measured", "target", "baseline / notes")
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, [*widths, 0], strict=False))]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, [*widths, 0], strict=False)) for row in rows
    ]
    lines.append(
        f"(medians of {numbers['rounds']} rounds; {numbers['calls_per_round']} calls per round "
        f"for G1, {numbers['calls_per_round'] * 2} timed calls per round inside the sandbox for G2; "
        f"G3 over {g3['rounds']} rounds; {os.cpu_count()} CPUs)"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--smoke", action="store_true", help="one tiny round: does it still run")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args()
    if not os.access(EVERYTHING, os.X_OK):
        print(f"{EVERYTHING} is missing: run `make third-party` first", file=sys.stderr)
        return 2
    numbers = anyio.run(run, args.quick, args.smoke)
    print(json.dumps(numbers, indent=2) if args.json else table(numbers))
    g3 = numbers["g3"]
    return 1 if g3["errors"] or g3["crosstalk"] else 0


if __name__ == "__main__":
    sys.exit(main())

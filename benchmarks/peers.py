"""codemode beside FastMCP's CodeMode, through the same official MCP client, rounds interleaved.

    .venv/bin/python benchmarks/peers.py [--quick] [--smoke] [--json] [--only P2,P3,...]

Needs the `bench` extra (`pip install -e '.[bench]'`: fastmcp with pydantic-monty). Both
systems run as streamable-HTTP servers in subprocesses over the same upstream stdio MCP server
(``peers_servers.py upstream``: ``ping``, ``echo``); FastMCP's experimental ``CodeMode``
(search, get_schema, execute on pydantic-monty) is configured as its docs show. Every metric
prints codemode / FastMCP (below 1: codemode is better), the median of the per-round ratios,
with their spread [min-max] and each side's median.

P1 surface: o200k tokens of the listed tools (one count, no spread)
P2 warm execute: a trivial execution (codemode `print(1)` in a warm session; FastMCP `return 1`)
P3 an execution with one proxied call to the upstream stdio server's `ping`
P4 search over the 3,224 operations of tests/data/specs (warm: after a first search)
P5 startup with the three specs: process start until the first `tools/list` answers
P6 a 1 MB string of mixed text through the upstream's `echo`, privacy on (codemode's default),
   a new text each call (the code's own text comes back: codemode hands it back unread)
P6b the same through the upstream's `stamp`, which puts a line before the text: codemode reads
   the tool's line and the edges of the code's text inside the result (a value may cross them)
P6c 5,000 contact records (about 1 MB as JSON: id, name, e-mail, phone, city, order count,
   note) from the upstream's `contacts`, new contacts each call, reduced in code to their count
   and order total: codemode tokenizes every record, and its vault grows by 10,000 values a call
   (measured last, after P7b: the memory metrics are about idle sessions of trivial code)
P7 20 new sessions arriving together: p95 of their first execute (after each burst the server
   is left to finish what the burst started, e.g. refilling its pool, before the other system's
   burst begins: `quiet`)
P7b the same burst the way clients arrive, with a thin client (burst_client.py) so the clients'
   own CPU weighs little: connect + initialize + first execute per client, p95 of each phase
   from the common start, and the wall time until the last one answered
P8 memory of 20 idle sessions: RSS, PSS and USS of each server's process tree after P7's
   clients are gone (process_memory.py: RSS counts shared pages once per process, PSS shares
   them out, USS counts private pages only)
P9 the same 20 sessions once codemode released their sandboxes (``[gateway] idle_release_s``,
   RELEASE_S here; after as long without a new sandbox, the warm pool too keeps none ready
   where sandboxes fork from a template): codemode's tree then, beside FastMCP's at the same
   moment

Not part of the test suite; `make bench` runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from burst_client import burst
from gateway import free_port, percentile
from process_memory import TreeMemory, tree_cpu_s, tree_memory

ROOT = Path(__file__).resolve().parents[1]
SERVERS = Path(__file__).resolve().parent / "peers_servers.py"
SPECS = sorted((ROOT / "tests" / "data" / "specs").glob("*.json.gz"))
QUERIES = ("create a customer", "list DNS records of a zone", "merge a pull request")
SESSIONS = 20
# codemode's idle release in this run: longer than any pause between a session's calls in the
# other metrics (so they never measure a restore), short enough that P9 waits little.
RELEASE_S = 20
# How long P9 waits for codemode's process count to hold still (the pool's 10 s window).
STEADY_S = 12
# About 1 MB of mixed text: order prose, a contact line (e-mail, phone) every 2 KB or so.
BIG = (
    "t = (('Order 4417 shipped to Berlin on 2024-05-02; invoice INV-0142 is due in 30 days, "
    "total 1,240.50 EUR. ' * 24 + 'Questions to ops@example.com or +49 30 1234567.\\n') "
    "* 420)[:1000000]"
)
SYSTEMS = ("codemode", "fastmcp")


def line(row: dict[str, Any]) -> str:
    spread = "{:.3g}-{:.3g}".format(*row["spread"]) if row["spread"] else "-"
    return (
        f"{row['metric']:<52} {row['ratio']:>6.3g} {spread:>13}   "
        f"{row['codemode']:g} / {row['fastmcp']:g} {row['unit']} ({row['rounds']} rounds)"
    )


@dataclass
class Metric:
    name: str
    unit: str
    # Per round: (codemode, fastmcp).
    rounds: list[tuple[float, float]] = field(default_factory=list)

    def add(self, ours: float, theirs: float) -> None:
        self.rounds.append((ours, theirs))

    def summary(self) -> dict[str, Any]:
        ratios = [ours / theirs for ours, theirs in self.rounds if theirs > 0]
        return {
            "metric": self.name,
            "unit": self.unit,
            "ratio": round(statistics.median(ratios), 3) if ratios else None,
            "spread": [round(min(ratios), 3), round(max(ratios), 3)] if ratios else None,
            "codemode": round(statistics.median(o for o, _ in self.rounds), 3),
            "fastmcp": round(statistics.median(t for _, t in self.rounds), 3),
            "rounds": len(self.rounds),
        }


# --- the two servers ------------------------------------------------------------------------


def codemode_argv(
    directory: Path, port: int, specs: bool, release_s: float = RELEASE_S
) -> list[str]:
    config = directory / "codemode.toml"
    if not config.exists():
        config.write_text(
            "[servers.up]\n"
            f"command = {json.dumps(sys.executable)}\n"
            f"args = {json.dumps([str(SERVERS), 'upstream'])}\n"
            # ping and echo change nothing: no approval (FastMCP asks for none either).
            'annotations_default = "read_only"\n\n'
            f'[gateway]\nstate_dir = "{directory / "state"}"\nmax_sessions = 200\n'
            f"idle_release_s = {release_s}\n"
        )
    argv = [sys.executable, "-m", "codemode", "serve", "--config", str(config)]
    # Loopback only, and FastMCP's server asks for no token either.
    argv += ["--transport", "http", "--port", str(port), "--insecure-allow-anonymous"]
    for spec in SPECS if specs else ():
        argv += ["--openapi", str(spec)]
    return argv


def fastmcp_argv(port: int, specs: bool) -> list[str]:
    argv = [sys.executable, str(SERVERS), "fastmcp", str(port), str(SERVERS)]
    return argv + ([str(spec) for spec in SPECS] if specs else [])


@contextlib.contextmanager
def listening(argv: list[str], port: int, log: Path, deadline_s: float) -> Iterator[int]:
    """A server subprocess's pid once its port accepts (FastMCP takes minutes to convert the
    three specs); the process is stopped on exit."""
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + deadline_s
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
        yield process.pid
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)


@contextlib.contextmanager
def server(
    system: str, directory: Path, specs: bool, release_s: float = RELEASE_S
) -> Iterator[tuple[str, int]]:
    """(URL, pid) of a started server; stopped on exit. ``release_s``: codemode's
    ``idle_release_s``."""
    port = free_port()
    if system == "codemode":
        argv = codemode_argv(directory, port, specs, release_s)
    else:
        argv = fastmcp_argv(port, specs)
    log = directory / f"{system}-{port}.log"
    with checkout_on_path(), listening(argv, port, log, 900 if specs else 120) as pid:
        yield f"http://127.0.0.1:{port}/mcp", pid


@contextlib.contextmanager
def checkout_on_path() -> Iterator[None]:
    """This checkout's ``src`` first on ``PYTHONPATH`` for the servers started meanwhile."""
    env_backup = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env_backup]))
    try:
        yield
    finally:
        if env_backup is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_backup


def trivial(system: str) -> str:
    return "print(1)" if system == "codemode" else "return 1"


def one_call(system: str) -> str:
    return "up.ping()" if system == "codemode" else "return await call_tool('up_ping', {})"


_calls = iter(range(10**9))


def echo(system: str, tool: str = "echo") -> str:
    # Each call's text is new (a real result is not the last one again): no cache answers it.
    big = f"{BIG}\nt = 'call {next(_calls)}: ' + t"
    if system == "codemode":
        return f"{big}\nprint(len(up.{tool}(text=t)))"
    return f"{big}\nr = await call_tool('up_{tool}', {{'text': t}})\nreturn len(r['result'])"


def stamp(system: str) -> str:
    return echo(system, "stamp")


CONTACTS = 5000  # about 1 MB of records as JSON


def contacts(system: str) -> str:
    # New contacts each call (a seed of their own): every one is new to codemode's vault.
    seed = next(_calls)
    if system == "codemode":
        return (
            f"rows = up.contacts(count={CONTACTS}, seed={seed})\n"
            "print(len(rows), sum(row['orders'] for row in rows))"
        )
    return (
        f"r = await call_tool('up_contacts', {{'count': {CONTACTS}, 'seed': {seed}}})\n"
        "rows = r['result']\n"
        "return [len(rows), sum(row['orders'] for row in rows)]"
    )


async def execute(client: Any, system: str, code: str, session: str | None = None) -> str | None:
    """Run ``code``; returns codemode's session handle. Raises when the execution failed."""
    arguments: dict[str, Any] = {"code": code}
    if system == "codemode" and session:
        arguments["session"] = session
    result = await client.call_tool("execute", arguments)
    if result.is_error:
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        raise RuntimeError(f"{system} execute failed: {text[:2000]}")
    data = result.structured_content or {}
    return data.get("session") if system == "codemode" else None


async def per_call_ms(call: Callable[[], Awaitable[Any]], n: int) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


# --- the metrics ----------------------------------------------------------------------------


async def surface_tokens(url: str) -> int:
    from mcp import Client

    from codemode.tokens import count_tokens

    async with Client(url) as client:
        tools = (await client.list_tools()).tools
    listed = [tool.model_dump(by_alias=True, exclude_none=True) for tool in tools]
    return count_tokens(json.dumps(listed, ensure_ascii=False))


async def warm_calls(urls: dict[str, str], rounds: int, n: int) -> list[Metric]:
    """P2, P3, P6 and P6b on one kept-open client per system, rounds interleaved."""
    from mcp import Client

    p2 = Metric("P2 warm execute (trivial code)", "ms p50")
    p3 = Metric("P3 execute with one proxied stdio call", "ms p50")
    p6 = Metric("P6 1 MB echo through a tool, privacy on", "ms p50")
    p6b = Metric("P6b 1 MB the tool changes (stamp), privacy on", "ms p50")
    async with Client(urls["codemode"]) as ours, Client(urls["fastmcp"]) as theirs:
        clients = {"codemode": ours, "fastmcp": theirs}
        session = await execute(ours, "codemode", "from servers import up\nup.ping()")
        for system, client in clients.items():  # warm both
            for code in (trivial(system), one_call(system), echo(system), stamp(system)):
                await execute(client, system, code, session)
        for _ in range(rounds):
            for metric, code_of, count in (
                (p2, trivial, n),
                (p3, one_call, n),
                (p6, echo, 3),
                (p6b, stamp, 3),
            ):
                times = []
                for system, client in clients.items():

                    async def call(client: Any = client, system: str = system, code_of=code_of):
                        await execute(client, system, code_of(system), session)

                    times.append(await per_call_ms(call, count))
                metric.add(times[0], times[1])
    return [p2, p3, p6, p6b]


async def contact_reads(urls: dict[str, str], rounds: int) -> Metric:
    """P6c, on a kept-open client per system, rounds interleaved. Run after the memory
    metrics: codemode's vault keeps the session's 10,000 new values a call while the session
    lives, which P8 and P9 (idle sessions of trivial code) are not about."""
    from mcp import Client

    metric = Metric(f"P6c {CONTACTS} contact records (1 MB) reduced in code", "ms p50")
    async with Client(urls["codemode"]) as ours, Client(urls["fastmcp"]) as theirs:
        clients = {"codemode": ours, "fastmcp": theirs}
        session = await execute(ours, "codemode", "from servers import up\nup.ping()")
        for system, client in clients.items():  # warm both
            await execute(client, system, contacts(system), session)
        for _ in range(rounds):
            times = []
            for system, client in clients.items():

                async def call(client: Any = client, system: str = system) -> None:
                    await execute(client, system, contacts(system), session)

                times.append(await per_call_ms(call, 3))
            metric.add(times[0], times[1])
    return metric


async def search_times(urls: dict[str, str], queries: tuple[str, ...]) -> Metric:
    """P4: each query once per system, after one search that builds what a first one builds."""
    from mcp import Client

    metric = Metric("P4 search over 3,224 operations (warm)", "ms")
    async with Client(urls["codemode"]) as ours, Client(urls["fastmcp"]) as theirs:
        with anyio.fail_after(900):
            await ours.call_tool("search", {"query": "warm up"})
        for query in queries:
            times = []
            for client in (ours, theirs):
                started = time.perf_counter()
                with anyio.fail_after(300):
                    # Both at their top 5 (FastMCP's default answer can pass the client's 1 MB cap).
                    result = await client.call_tool("search", {"query": query, "limit": 5})
                assert not result.is_error, result.content
                times.append((time.perf_counter() - started) * 1000)
            metric.add(times[0], times[1])
    return metric


async def startup_ms(system: str, directory: Path) -> float:
    from mcp import Client

    started = time.perf_counter()
    with server(system, directory, specs=True) as (url, _):
        async with Client(url) as client:
            with anyio.fail_after(600):
                await client.list_tools()
        return (time.perf_counter() - started) * 1000


async def burst_p95(url: str, system: str) -> float:
    """P7: SESSIONS clients start together; each one's first execute, from the common start."""
    from mcp import Client

    go = anyio.Event()
    times: list[float] = []

    async def one() -> None:
        await go.wait()
        started = time.perf_counter()
        async with Client(url) as client:
            await execute(client, system, trivial(system))
        times.append((time.perf_counter() - started) * 1000)

    with anyio.fail_after(300):
        async with anyio.create_task_group() as group:
            for _ in range(SESSIONS):
                group.start_soon(one)
            go.set()
    return percentile(times, 0.95)


async def arrivals(urls: dict[str, str], pids: dict[str, int], rounds: int) -> list[Metric]:
    """P7b: rounds of SESSIONS thin clients at once, systems interleaved, each burst on a
    quiet server."""
    initialized = Metric(f"P7b {SESSIONS} arrive at once: initialized", "ms p95")
    executed = Metric(f"P7b {SESSIONS} arrive at once: first execute", "ms p95")
    wall = Metric(f"P7b {SESSIONS} arrive at once: wall", "ms")
    for _ in range(rounds):
        rows = {}
        for system in SYSTEMS:
            rows[system] = await burst(urls[system], trivial(system), SESSIONS)
            await quiet(pids[system])
        (ours, our_wall), (theirs, their_wall) = rows["codemode"], rows["fastmcp"]
        for metric, phase in ((initialized, "initialized_ms"), (executed, "executed_ms")):
            mine = percentile([getattr(one, phase) for one in ours], 0.95)
            metric.add(mine, percentile([getattr(one, phase) for one in theirs], 0.95))
        wall.add(our_wall, their_wall)
    return [initialized, executed, wall]


async def quiet(pid: int, *, window_s: float = 0.5, deadline_s: float = 30.0) -> None:
    """Wait until ``pid``'s process tree used under 5% of one CPU over ``window_s``: work a
    burst left behind (starting sandboxes, releasing sessions) must not run during the other
    system's burst."""
    deadline = time.monotonic() + deadline_s
    before = tree_cpu_s(pid)
    while time.monotonic() < deadline:
        await anyio.sleep(window_s)
        now = tree_cpu_s(pid)
        if now - before < 0.05 * window_s:
            return
        before = now


async def released_tree(pid: int, before: int, deadline_s: float) -> TreeMemory:
    """The memory of ``pid``'s tree once the idle sessions' sandboxes are gone (at least one
    process each fewer than ``before``: the guest forked from the template, or bwrap and the
    guest) and the count has held still for STEADY_S (the warm pool is down to its floor)."""
    deadline = time.monotonic() + deadline_s
    last, since = -1, time.monotonic()
    while True:
        memory = tree_memory(pid)
        count = memory.processes
        if count != last:
            last, since = count, time.monotonic()
        elif count <= before - SESSIONS and time.monotonic() - since >= STEADY_S:
            return memory
        if time.monotonic() > deadline:
            raise SystemExit(f"codemode still runs {count} processes ({before} before release)")
        await anyio.sleep(0.5)


def memory_metrics(prefix: str) -> dict[str, Metric]:
    """One metric per way of counting a tree's memory, named ``prefix`` + the measure."""
    return {kind: Metric(f"{prefix} ({kind.upper()})", f"MiB {kind.upper()}") for kind in MEASURES}


def add_memory(metrics: dict[str, Metric], ours: TreeMemory, theirs: TreeMemory) -> None:
    for kind, metric in metrics.items():
        metric.add(getattr(ours, kind), getattr(theirs, kind))


MEASURES = ("rss", "pss", "uss")


# --- the run --------------------------------------------------------------------------------


async def run(quick: bool, only: set[str], smoke: bool = False) -> dict[str, Any]:
    rounds, n = (1, 2) if smoke else (3, 30) if quick else (7, 100)
    wanted = (lambda key: key in only) if only else (lambda key: True)
    with tempfile.TemporaryDirectory(prefix="codemode-peers-") as temporary:
        return await measure(Path(temporary), rounds, n, wanted, only)


async def measure(
    directory: Path, rounds: int, n: int, wanted: Callable[[str], bool], only: set[str]
) -> dict[str, Any]:
    metrics: list[Metric] = []
    notes: dict[str, Any] = {}
    if wanted("P5"):
        p5 = Metric("P5 startup with three specs (to the first tools/list)", "ms")
        for _ in range(1 if rounds < 7 else 3):
            p5.add(*[await startup_ms(system, directory) for system in SYSTEMS])
        measured(metrics, p5)
    if wanted("P4"):
        with (
            server("codemode", directory, specs=True) as (ours, _),
            server("fastmcp", directory, specs=True) as (theirs, _),
        ):
            measured(metrics, await search_times({"codemode": ours, "fastmcp": theirs}, QUERIES))
    with (
        server("codemode", directory, specs=False) as (ours, our_pid),
        server("fastmcp", directory, specs=False) as (theirs, their_pid),
    ):
        urls = {"codemode": ours, "fastmcp": theirs}
        if wanted("P1"):
            p1 = Metric("P1 surface (listed tools)", "o200k tokens")
            p1.add(await surface_tokens(ours), await surface_tokens(theirs))
            measured(metrics, p1)
        if only & {"P2", "P3", "P6", "P6B"} or not only:
            measured(metrics, *await warm_calls(urls, rounds, n))
        if wanted("P7") or wanted("P8") or wanted("P9"):
            p7 = Metric(f"P7 {SESSIONS} new sessions at once: first execute", "ms p95")
            p8 = memory_metrics(f"P8 memory of {SESSIONS} idle sessions")
            p9 = memory_metrics(f"P9 memory of {SESSIONS} idle sessions, released")
            for index in range(min(rounds, 5)):  # every round leaves 20 idle sessions
                ours_p95 = await burst_p95(ours, "codemode")
                await quiet(our_pid)
                p7.add(ours_p95, await burst_p95(theirs, "fastmcp"))
                await quiet(their_pid)
                if index == 0:  # the first round's sessions only (later rounds add more)
                    ours_tree, theirs_tree = tree_memory(our_pid), tree_memory(their_pid)
                    add_memory(p8, ours_tree, theirs_tree)
                    notes["P8 processes"] = {
                        "codemode": ours_tree.processes,
                        "fastmcp": theirs_tree.processes,
                    }
                    if wanted("P9"):
                        released = await released_tree(our_pid, ours_tree.processes, RELEASE_S + 60)
                        theirs_now = tree_memory(their_pid)
                        add_memory(p9, released, theirs_now)
                        notes["P9 processes"] = {
                            "codemode": released.processes,
                            "fastmcp": theirs_now.processes,
                        }
            chosen = [p7] if wanted("P7") else []
            chosen += list(p8.values()) if wanted("P8") else []
            chosen += list(p9.values()) if wanted("P9") else []
            measured(metrics, *chosen)
        if wanted("P7") or wanted("P7B"):
            pids = {"codemode": our_pid, "fastmcp": their_pid}
            measured(metrics, *await arrivals(urls, pids, min(rounds, 5)))
        if wanted("P6C"):
            measured(metrics, await contact_reads(urls, rounds))
    notes["codemode search"] = search_mode()
    return {"metrics": [m.summary() for m in metrics], "notes": notes, "cpus": os.cpu_count()}


def search_mode() -> str:
    """How codemode's gateways here search (they run in this environment): with the model,
    an idle gateway holds none of it, but its memory differs from a words-only one's."""
    from codemode.search.encoder import INSTALL_HINT, semantic_available

    if semantic_available():
        return "semantic (the embedding model is installed)"
    return f"by words only: the embedding model is not installed ({INSTALL_HINT})"


def measured(metrics: list[Metric], *new: Metric) -> None:
    """Keep ``new`` and say it on stderr at once (a long run that fails later keeps it)."""
    for metric in new:
        metrics.append(metric)
        print(line(metric.summary()), file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated metrics, e.g. P2,P3")
    parser.add_argument(
        "--smoke", action="store_true", help="P1 to P3, one tiny round: does it still run"
    )
    args = parser.parse_args()
    if args.smoke:
        args.only = args.only or "P1,P2,P3"
    try:
        import fastmcp  # noqa: F401
        import pydantic_monty  # noqa: F401
    except ImportError:
        print("needs the bench extra: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    only = {part.strip().upper() for part in args.only.split(",") if part.strip()}
    numbers = anyio.run(run, args.quick, only, args.smoke)
    if args.json:
        print(json.dumps(numbers))
        return 0
    print(f"{'metric':<52} {'ratio':>6} {'spread':>13}   codemode / fastmcp")
    for row in numbers["metrics"]:
        print(line(row))
    for name, value in numbers["notes"].items():
        print(f"{name}: {value}")
    print(f"ratio = codemode / FastMCP CodeMode (below 1: codemode better); {numbers['cpus']} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

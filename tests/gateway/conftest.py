"""A real ``codemode serve`` subprocess per test module, reached with the official MCP client.

Each module gets a fresh directory holding a codemode.toml, the demo data, a directory that
server-filesystem may write to and server-memory's file. Readiness and shutdown are bounded
polls on the process, never sleeps. On teardown every process the gateway started (upstreams,
sandboxes) must be gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from codemode.demo import server_commands

NODE_BIN = Path(__file__).resolve().parents[2] / "third_party" / "node_modules" / ".bin"
# The same commands as tests/conftest.py's third_party_server (module-scoped fixtures here).
THIRD_PARTY = {
    "memory": [str(NODE_BIN / "mcp-server-memory")],
    "filesystem": [str(NODE_BIN / "mcp-server-filesystem")],
    "everything": [str(NODE_BIN / "mcp-server-everything")],
    "inspector": [str(NODE_BIN / "mcp-inspector")],
}
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
# Every test config's HTTP bearer tokens (owner -> token); clients send MAIN's by default.
MAIN = "main"
TOKENS = {
    name: f"{name}-token-{index:02d}"
    for index, name in enumerate(
        [MAIN, "alice", "bob", "carol", *(f"client-{i}" for i in range(8))]
    )
}


def bearer(owner: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[owner]}"}


@pytest.fixture
async def bare_engine() -> AsyncIterator[Any]:
    """A started engine with no servers and in-process sandboxes (no isolation: honest code
    only), for tests of the gateway's own wiring."""
    from codemode.catalog.catalog import Catalog
    from codemode.config import CodemodeConfig
    from codemode.engine import Codemode
    from codemode.sandbox.inprocess import InProcessSandboxes

    sandboxes = InProcessSandboxes()
    config = CodemodeConfig(servers={})
    async with Codemode(config, catalog=Catalog([]), sandboxes=sandboxes, semantic=False) as engine:
        yield engine


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    # Module scope so a module-scoped async fixture can hold one open client for the module.
    return "asyncio"


# --- processes ------------------------------------------------------------------------------


def _ppid_map() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces: split after the last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
    return parents


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children, grandchildren...)."""
    parents = _ppid_map()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


def pids_whose_cmdline_contains(fragment: str) -> set[int]:
    found: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if fragment.encode() in cmdline:
            found.add(int(entry.name))
    return found


def wait_until_gone(pids: set[int], timeout_s: float = STOP_TIMEOUT_S) -> set[int]:
    """Bounded poll (on a throwaway pipe, no sleep) until none of ``pids`` is alive."""
    deadline = time.monotonic() + timeout_s
    left = {pid for pid in pids if alive(pid)}
    while left and time.monotonic() < deadline:
        _pause(0.05)
        left = {pid for pid in left if alive(pid)}
    return left


def _pause(seconds: float) -> None:
    read_end, write_end = os.pipe()
    try:
        import select

        select.select([read_end], [], [], seconds)
    finally:
        os.close(read_end)
        os.close(write_end)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- configuration --------------------------------------------------------------------------


@dataclass
class GatewayDirs:
    root: Path
    config: Path
    data: Path
    files: Path  # server-filesystem's allowed directory
    memory_file: Path


def write_config(
    root: Path,
    upstreams: Mapping[str, Sequence[str]],
    *,
    env: Mapping[str, Mapping[str, str]] | None = None,
    pool_size: int = 2,
    gateway: Mapping[str, float | int] | None = None,
) -> Path:
    lines = [f"# written by {__name__}", ""]
    for name, (command, *args) in upstreams.items():
        lines += [
            f"[servers.{name}]",
            f"command = {json.dumps(command)}",
            f"args = {json.dumps(list(args))}",
            # Unannotated tools would ask for approval (the MCP default); these tests are about
            # the gateway, and tests/catalog/test_destructive_default.py covers the asking.
            'annotations_default = "not_destructive"',
        ]
        if env and name in env:
            pairs = ", ".join(f"{key} = {json.dumps(v)}" for key, v in env[name].items())
            lines.append(f"env = {{ {pairs} }}")
        lines.append("")
    lines += ["[sandbox]", f"pool_size = {pool_size}", ""]
    lines += ["[gateway]", f'state_dir = "{root / "state"}"']
    lines += [f"{key} = {value}" for key, value in (gateway or {}).items()]
    lines += ["", "[gateway.tokens]"]
    lines += [f"{owner} = {json.dumps(token)}" for owner, token in TOKENS.items()]
    lines.append("")
    path = root / "codemode.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def gateway_dirs(
    tmp_path_factory: pytest.TempPathFactory, fake_server_argv: list[str]
) -> GatewayDirs:
    """docs + crm (demo), memory + filesystem (third-party), fake (ours, crashes on demand)."""
    for name in ("memory", "filesystem"):
        if not os.access(THIRD_PARTY[name][0], os.X_OK):
            pytest.fail(f"{THIRD_PARTY[name][0]} is missing: run `make third-party` first")
    root = tmp_path_factory.mktemp("gateway")
    data, files = root / "data", root / "files"
    files.mkdir()
    memory_file = root / "memory.jsonl"
    demo = server_commands(data)
    upstreams = {
        "docs": demo["docs"],
        "crm": demo["crm"],
        "memory": THIRD_PARTY["memory"],
        "filesystem": [*THIRD_PARTY["filesystem"], str(files)],
        "fake": fake_server_argv,
    }
    config = write_config(root, upstreams, env={"memory": {"MEMORY_FILE_PATH": str(memory_file)}})
    return GatewayDirs(root, config, data, files, memory_file)


# --- the gateway process --------------------------------------------------------------------


def serve_argv(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "codemode", "serve", "--config", str(config), *extra]


@dataclass
class HTTPGateway:
    """``codemode serve --transport http`` on a free port."""

    config: Path
    log_path: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    extra_args: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def start(self) -> HTTPGateway:
        argv = serve_argv(
            self.config, "--transport", "http", "--port", str(self.port), *self.extra_args
        )
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=0.05)
            if self.process.returncode is not None:
                raise AssertionError(f"the gateway exited early:\n{self.log()}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
        self.stop()
        raise AssertionError(
            f"the gateway did not listen within {START_TIMEOUT_S} s:\n{self.log()}"
        )

    def stop(self) -> set[int]:
        """SIGTERM, a bounded wait, then SIGKILL. Returns the descendants still alive after."""
        process = self.process
        if process is None or process.returncode is not None:
            return set()
        children = descendants(process.pid)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)
            raise AssertionError(f"the gateway ignored SIGTERM:\n{self.log()}") from None
        return wait_until_gone(children)


def client_for(target: Any, **options: Any) -> Any:
    from mcp import Client

    return Client(target, read_timeout_seconds=60, **options)


def stdio_target(config: Path) -> Any:
    from mcp import StdioServerParameters
    from mcp.client.stdio import get_default_environment

    # The SDK passes a minimal environment: keep PYTHONPATH, so the gateway imports the same
    # codemode as the tests.
    env = get_default_environment()
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return StdioServerParameters(command=sys.executable, args=serve_argv(config)[1:], env=env)


def http_target(url: str, headers: Mapping[str, str] | None = None) -> Any:
    """A streamable HTTP transport; ``headers`` (e.g. Authorization) go with every request."""
    if not headers:
        return url
    from mcp.client.streamable_http import streamable_http_client

    from codemode.sdk_compat import mcp_http_client

    return _with_headers(streamable_http_client, mcp_http_client, url, dict(headers))


@contextlib.asynccontextmanager
async def _with_headers(
    transport: Callable[..., Any],
    make_client: Callable[..., Any],
    url: str,
    headers: dict[str, str],
) -> AsyncIterator[Any]:
    async with make_client(headers) as http, transport(url, http_client=http) as streams:
        yield streams


@dataclass
class Gateway:
    """One gateway per module: ``client`` stays open; ``connect()`` opens another client."""

    transport: str
    dirs: GatewayDirs
    client: Any = None
    http: HTTPGateway | None = None

    def connect(self, *, mode: str = "auto", headers: Mapping[str, str] | None = None) -> Any:
        """A new client: over HTTP to the same process (with MAIN's token unless ``headers``
        say otherwise); over stdio a new gateway process."""
        if self.http is not None:
            sent = bearer(MAIN) if headers is None else headers
            return client_for(http_target(self.http.url, sent), mode=mode)
        return client_for(stdio_target(self.dirs.config), mode=mode)

    def gateway_pids(self) -> set[int]:
        if self.http is not None:
            assert self.http.process is not None
            return {self.http.process.pid}
        return pids_whose_cmdline_contains(str(self.dirs.config))


def sandbox_markers(pids: set[int]) -> set[str]:
    """The per-backend directories (``/tmp/codemode-etc-*``) named in these processes' argv."""
    markers: set[str] = set()
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for arg in argv:
            text = arg.decode(errors="replace")
            if text.startswith("/tmp/codemode-etc-"):
                markers.add(text.split("/")[2])
    return markers


@contextlib.asynccontextmanager
async def open_gateway(transport: str, dirs: GatewayDirs) -> AsyncIterator[Gateway]:
    """Start the gateway, yield it with an open client, stop it and check nothing is left.

    Nothing left means: no process that was below the gateway, none that names this module's
    directory, and no sandbox of the gateway's backend (found by the backend's /tmp directory
    in bwrap's argv), which also catches sandboxes orphaned in the middle of the module.
    """
    gateway = Gateway(transport, dirs)
    children: set[int] = set()
    if transport == "http":
        gateway.http = HTTPGateway(dirs.config, dirs.root / "gateway-http.log").start()
    try:
        async with gateway.connect() as client:
            gateway.client = client
            for pid in gateway.gateway_pids():
                children |= {pid, *descendants(pid)}
            yield gateway
            for pid in gateway.gateway_pids():
                children |= {pid, *descendants(pid)}
    finally:
        markers = sandbox_markers(children)
        if gateway.http is not None:
            left = gateway.http.stop()
        else:
            left = wait_until_gone(children)
    left = wait_until_gone(children | left)
    assert not left, f"the gateway left processes behind: {sorted(left)}"
    # Anything that names this module's directory (upstreams, extra gateways) must be gone too.
    assert not pids_whose_cmdline_contains(str(dirs.root)), "processes of this module remain"
    for marker in markers:
        orphans = wait_until_gone(pids_whose_cmdline_contains(marker))
        assert not orphans, f"sandboxes of this gateway ({marker}) outlived it: {sorted(orphans)}"


def structured(result: Any) -> dict[str, Any]:
    data = result.structured_content
    assert isinstance(data, dict), f"no structured content: {result.content}"
    return data


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def execute(client: Any, code: str, **arguments: Any) -> dict[str, Any]:
    """Run ``code``; returns the structured result (with ``is_error`` copied in)."""
    result = await client.call_tool("execute", {"code": code, **arguments})
    data = dict(structured(result))
    data["is_error"] = bool(result.is_error)
    data["text"] = text_of(result)
    return data


async def search_when_indexed(client: Any, arguments: dict[str, Any]) -> Any:
    """Search once the gateway's background index build is done (bounded wait): until then
    answers are lexical only, and say so."""
    import anyio

    with anyio.fail_after(START_TIMEOUT_S):
        while True:
            result = await client.call_tool("search", arguments)
            if not structured(result).get("lexical_only"):
                return result
            await anyio.sleep(0.2)  # a bounded poll on the gateway's state


async def execute_ok(client: Any, code: str, **arguments: Any) -> dict[str, Any]:
    data = await execute(client, code, **arguments)
    assert data["status"] == "ok" and not data["is_error"], data["text"]
    return data


# Every conftest.py is imported under the same top-level name, so sys.modules["conftest"] ends up
# as whichever was imported last: keep a reference to this one while it is the one.
_THIS_MODULE = sys.modules[__name__]


def process_named(tag: str) -> int:
    """The host pid of the one process whose name (``comm``) is ``tag``: sandbox code renames
    its interpreter to find it from the host."""
    found = [
        int(path.parent.name) for path in Path("/proc").glob("[0-9]*/comm") if _comm(path) == tag
    ]
    assert len(found) == 1, f"expected one process named {tag!r}, found {found}"
    return found[0]


def _comm(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


@pytest.fixture(scope="session")
def harness() -> Any:
    """This module's helpers for test files (conftest modules cannot be imported by name)."""
    return _THIS_MODULE

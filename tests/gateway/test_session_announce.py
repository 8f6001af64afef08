"""A client's first requests (connecting, listing, searching) announce a session to the
sandboxes before its first execute: a warm pool back from idle starts its template then, not
when the execute asks for a sandbox (``GatewayHandlers.expect_session``)."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.engine import Codemode
from codemode.gateway.handlers import GatewayHandlers
from codemode.gateway.server import build_server
from codemode.sandbox.inprocess import InProcessSandboxes
from tests.gateway.conftest import (
    MAIN,
    HTTPGateway,
    bearer,
    client_for,
    descendants,
    http_target,
    structured,
    write_config,
)

pytestmark = pytest.mark.anyio


# How a client of each era connects: a 2025-era one with `initialize` (its
# `notifications/initialized` announces nothing), a newer one with `server/discover`.
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_connecting_listing_and_calling_announce_a_session_and_a_ping_does_not(
    bare_engine: Codemode, mode: str
) -> None:
    sandboxes = bare_engine.sandboxes
    assert isinstance(sandboxes, InProcessSandboxes)
    server = build_server(bare_engine)
    async with Client(server, mode=mode) as client:
        assert sandboxes.expected == 1, "connecting announced nothing"
        if mode == "legacy":  # the newer protocol has no ping (the SDK warns of it)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.send_ping()
            assert sandboxes.expected == 1, "a keep-alive would keep an idle pool warm forever"
        await client.list_tools()
        assert sandboxes.expected == 2
        result = await client.call_tool("search", {"query": "anything"})
        assert not result.is_error
        assert sandboxes.expected == 3
        result = await client.call_tool("execute", {"code": "print(1)"})
        assert not result.is_error
        assert sandboxes.expected == 4


async def test_an_engine_not_started_has_nothing_to_ready() -> None:
    engine = Codemode(CodemodeConfig(servers={}), catalog=Catalog([]), semantic=False)
    GatewayHandlers(engine).expect_session()  # no sandboxes yet: nothing to do, nothing raised
    assert engine.sandboxes is None


class _Failing(InProcessSandboxes):
    def expect(self) -> None:
        raise RuntimeError("no")


async def test_sandboxes_that_fail_to_get_ready_fail_no_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with Codemode(
        CodemodeConfig(servers={}), catalog=Catalog([]), sandboxes=_Failing(), semantic=False
    ) as engine:
        async with Client(build_server(engine), mode="legacy") as client:
            result = await client.call_tool("execute", {"code": "print(1)"})
            assert not result.is_error
    assert "could not get ready for a coming session" in caplog.text


def _bwraps_below(pid: int) -> set[int]:
    """The bubblewrap processes below ``pid`` (the template's, or a sandbox's of its own)."""
    found = set()
    for child in descendants(pid):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{child}/comm").read_text().strip() == "bwrap":
                found.add(child)
    return found


def _until(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _rest_for_good(pid: int) -> None:
    """Until the gateway ``pid`` has run no bubblewrap for 2.5 s (its pool, idle, looks again
    every second): the template it started with has stopped, and nothing starts another."""
    deadline = time.monotonic() + 90
    while True:
        _until(lambda: not _bwraps_below(pid), "the idle gateway kept its template")
        time.sleep(2.5)
        if not _bwraps_below(pid):
            return
        assert time.monotonic() < deadline, "the idle gateway keeps starting its template"


async def test_a_client_connecting_to_an_idle_gateway_starts_its_template_before_it_executes(
    tmp_path: Path,
) -> None:
    """A real ``codemode serve`` over HTTP, idle after 1 s: its template stops; a client that
    connects and lists the tools starts it again, with no execute sent."""
    config = write_config(tmp_path, {}, pool_size=1, gateway={"idle_release_s": 1})
    gateway = HTTPGateway(config, tmp_path / "gateway.log").start()
    try:
        assert gateway.process is not None
        pid = gateway.process.pid
        _rest_for_good(pid)
        async with client_for(http_target(gateway.url, bearer(MAIN))) as client:
            await client.list_tools()
            _until(lambda: bool(_bwraps_below(pid)), "connecting did not start the template")
            assert (
                structured(await client.call_tool("execute", {"code": "print(1)"}))["stdout"]
                == "1\n"
            )
    finally:
        left = gateway.stop()
    assert not left, f"the gateway left processes behind: {sorted(left)}"

"""A client's first requests (connecting, listing, searching) announce a session to the
sandboxes before its first execute: a warm pool back from idle starts its template then, not
when the execute asks for a sandbox (``GatewayHandlers.expect_session``)."""

from __future__ import annotations

import warnings

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.engine import Codemode
from codemode.gateway.handlers import GatewayHandlers
from codemode.gateway.server import build_server
from codemode.sandbox.inprocess import InProcessSandboxes

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

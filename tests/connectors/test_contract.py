"""The error contract of ``codemode.connectors.base``, checked against every real connector.

A tool's own failure is an error result; a failing upstream raises ``UpstreamUnavailableError``;
an unknown tool raises ``ToolNotFoundError`` where the connector can tell without asking.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

import pytest
from openapi_fixture import PETSTORE

from codemode.connectors.base import BaseConnector, ToolsChangedCallback
from codemode.connectors.factory import FilteredConnector
from codemode.connectors.mcp import HTTPTarget, MCPConnector, StdioTarget
from codemode.connectors.openapi import OpenAPIConnector
from codemode.connectors.python import PythonConnector
from codemode.errors import ToolNotFoundError, UpstreamUnavailableError
from codemode.tools import ToolResult, ToolSpec

pytestmark = pytest.mark.anyio


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on (connections are refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A local port that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield int(sock.getsockname()[1])


def test_every_connector_is_a_base_connector():
    for cls in (MCPConnector, OpenAPIConnector, PythonConnector, FilteredConnector):
        assert issubclass(cls, BaseConnector), cls


# --- a tool's own failure is a result ---------------------------------------------------------


async def test_python_tool_failures_are_results_and_unknown_tools_raise():
    def explode(reason: str) -> str:
        """Fail on purpose."""
        raise RuntimeError(reason)

    connector = PythonConnector("py", [explode])
    await connector.start()  # the base class's no-op: nothing to start
    failed = await connector.call_tool("explode", {"reason": "boom"})
    assert failed.is_error and failed.error_message == "RuntimeError: boom"
    invalid = await connector.call_tool("explode", {})
    assert invalid.is_error and "invalid arguments for py.explode" in (invalid.error_message or "")
    with pytest.raises(ToolNotFoundError, match="no tool 'nope'"):
        await connector.call_tool("nope", {})
    await connector.aclose()


async def test_mcp_tool_failures_are_results(fake_server_argv):
    connector = MCPConnector("fake", StdioTarget(fake_server_argv[0], fake_server_argv[1:]))
    try:
        bad = await connector.call_tool("add", {"a": "not a number", "b": 1})
        # An MCP server answers an unknown tool itself: that answer is an error result.
        unknown = await connector.call_tool("nope", {})
    finally:
        await connector.aclose()
    assert bad.is_error and bad.error_message
    assert unknown.is_error and "nope" in (unknown.error_message or "")


# --- a failing upstream raises UpstreamUnavailableError ---------------------------------------


async def test_openapi_unreachable_api_raises_upstream_unavailable(closed_port):
    base = f"http://127.0.0.1:{closed_port}/v1"
    connector = OpenAPIConnector("pets", PETSTORE, base_url=base, timeout_s=5)
    try:
        with pytest.raises(UpstreamUnavailableError, match=r"pets: GET http://127\.0\.0\.1:\d+"):
            await connector.call_tool("getPet", {"pet-id": "1"})
    finally:
        await connector.aclose()


async def test_openapi_api_that_does_not_answer_raises_upstream_unavailable(silent_port):
    base = f"http://127.0.0.1:{silent_port}/v1"
    connector = OpenAPIConnector("pets", PETSTORE, base_url=base, timeout_s=0.3)
    try:
        with pytest.raises(UpstreamUnavailableError, match=r"timed out after 0\.3 s"):
            await connector.call_tool("getPet", {"pet-id": "1"})
    finally:
        await connector.aclose()


async def test_openapi_unreachable_spec_url_raises_upstream_unavailable(closed_port):
    connector = OpenAPIConnector("pets", f"http://127.0.0.1:{closed_port}/openapi.json")
    with pytest.raises(UpstreamUnavailableError, match="cannot download OpenAPI spec"):
        await connector.list_tools()
    await connector.aclose()


async def test_openapi_without_base_url_raises_upstream_unavailable_with_the_fix():
    connector = OpenAPIConnector("pets", {**PETSTORE, "servers": []})
    assert len(await connector.list_tools()) > 0  # listing works: the tools are searchable
    with pytest.raises(UpstreamUnavailableError, match="set base_url for server 'pets'"):
        await connector.call_tool("getPet", {"pet-id": "1"})
    await connector.aclose()


async def test_mcp_server_that_cannot_start_raises_upstream_unavailable(tmp_path):
    script = tmp_path / "dies.py"
    script.write_text("import sys; sys.exit(1)")
    connector = MCPConnector("dead", StdioTarget(sys.executable, [str(script)]))
    with pytest.raises(UpstreamUnavailableError, match="'dead' could not start"):
        await connector.start()
    await connector.aclose()


async def test_mcp_http_server_unreachable_raises_upstream_unavailable(closed_port):
    target = HTTPTarget(f"http://127.0.0.1:{closed_port}/mcp")
    connector = MCPConnector("remote", target, start_timeout_s=10)
    with pytest.raises(UpstreamUnavailableError, match="'remote' could not start"):
        await connector.list_tools()
    await connector.aclose()


async def test_mcp_call_that_times_out_raises_upstream_unavailable(fake_server_argv):
    target = StdioTarget(fake_server_argv[0], fake_server_argv[1:])
    connector = MCPConnector("fake", target, call_timeout_s=0.5)
    try:
        with pytest.raises(UpstreamUnavailableError, match=r"did not answer within 0\.5 s"):
            await connector.call_tool("slow", {"seconds": 30})
    finally:
        await connector.aclose()


async def test_mcp_server_that_dies_mid_call_raises_upstream_unavailable(fake_server_argv):
    connector = MCPConnector("fake", StdioTarget(fake_server_argv[0], fake_server_argv[1:]))
    try:
        with pytest.raises(UpstreamUnavailableError, match="'fake' failed during a call"):
            await connector.call_tool("crash", {})
    finally:
        await connector.aclose()


# --- FilteredConnector delegates explicitly ---------------------------------------------------


class Recording(BaseConnector):
    """An in-memory connector that records what reaches it."""

    def __init__(self) -> None:
        self.name = "rec"
        self.events: list[str] = []
        self.callbacks: list[ToolsChangedCallback] = []

    async def start(self) -> None:
        self.events.append("start")

    async def list_tools(self) -> list[ToolSpec]:
        return [ToolSpec("rec", "read_x"), ToolSpec("rec", "write_x")]

    async def call_tool(self, tool: str, arguments: dict[str, object]) -> ToolResult:
        self.events.append(f"call {tool}")
        return ToolResult(value=tool)

    async def aclose(self) -> None:
        self.events.append("aclose")

    def on_tools_changed(self, callback: ToolsChangedCallback) -> None:
        self.callbacks.append(callback)


async def test_filtered_connector_delegates_every_hook():
    inner = Recording()
    filtered = FilteredConnector(inner, ["read_*"])
    await filtered.start()
    assert [spec.name for spec in await filtered.list_tools()] == ["read_x"]
    assert (await filtered.call_tool("read_x", {})).value == "read_x"
    with pytest.raises(ToolNotFoundError, match="filtered out by the config"):
        await filtered.call_tool("write_x", {})

    def callback(server: str) -> None:
        return None

    filtered.on_tools_changed(callback)
    await filtered.aclose()
    assert inner.events == ["start", "call read_x", "aclose"]
    assert inner.callbacks == [callback]
    assert not hasattr(filtered, "callbacks")  # nothing reaches `inner` by attribute magic

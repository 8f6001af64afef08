"""Catalog over several connectors: concurrent load, failures isolated, cache, refresh."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from codemode.catalog import Catalog, MemoryDefinitionCache
from codemode.connectors.base import BaseConnector, ToolsChangedCallback
from codemode.connectors.factory import FilteredConnector
from codemode.connectors.mcp import MCPConnector, StdioTarget
from codemode.connectors.python import PythonConnector
from codemode.errors import ToolNotFoundError, UpstreamUnavailableError
from codemode.tools import ToolResult, ToolSpec

pytestmark = pytest.mark.anyio


class FakeConnector(BaseConnector):
    """An in-memory connector whose tools, failures and change announcements tests control."""

    def __init__(self, name: str, tools: list[str], *, fail: bool = False) -> None:
        self.name = name
        self.tools = tools
        self.fail = fail
        self.listed = 0
        self.started = 0
        self.closed = False
        self.callbacks: list[ToolsChangedCallback] = []

    def on_tools_changed(self, callback: ToolsChangedCallback) -> None:
        self.callbacks.append(callback)

    def announce_change(self) -> None:
        for callback in self.callbacks:
            callback(self.name)

    async def start(self) -> None:
        self.started += 1

    async def list_tools(self) -> list[ToolSpec]:
        self.listed += 1
        if self.fail:
            raise UpstreamUnavailableError(f"{self.name} is down")
        await asyncio.sleep(0)
        return [ToolSpec(server=self.name, name=tool) for tool in self.tools]

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(value={"tool": tool, **arguments})

    async def aclose(self) -> None:
        self.closed = True


async def test_load_isolates_a_dead_upstream():
    good, bad = FakeConnector("good", ["a", "b"]), FakeConnector("bad", ["c"], fail=True)
    catalog = Catalog([good, bad])
    failures = await catalog.load()
    assert list(failures) == ["bad"] and "bad is down" in failures["bad"]
    assert [spec.qualified_name for spec in catalog.specs()] == ["good.a", "good.b"]
    assert (await catalog.call("good", "a", {"x": 1})).value == {"tool": "a", "x": 1}
    with pytest.raises(UpstreamUnavailableError, match="bad is down"):
        await catalog.call("bad", "c", {})
    assert list(catalog.unavailable()) == ["bad"]
    version = catalog.version
    bad.fail = False  # it came back: the next call re-lists it
    assert (await catalog.call("bad", "c", {})).value == {"tool": "c"}
    assert catalog.unavailable() == {}
    assert catalog.version == version + 1  # views (stubs, search) are rebuilt with its tools
    await catalog.aclose()
    assert good.closed and bad.closed


async def test_unknown_tools_and_servers():
    catalog = Catalog([FakeConnector("crm", ["update_record"])])
    await catalog.load()
    with pytest.raises(ToolNotFoundError, match="did you mean 'update_record'"):
        await catalog.call("crm", "update_recrd", {})
    with pytest.raises(ToolNotFoundError, match="no server named 'crn'"):
        catalog.get("crn", "x")
    assert catalog.get("crm", "update_record").name == "update_record"


async def test_cache_skips_listing_and_eager_servers_start():
    cache = MemoryDefinitionCache()
    first = FakeConnector("s", ["a"])
    catalog = Catalog([first], cache=cache, fingerprints={"s": "fp"})
    await catalog.load()
    assert first.listed == 1
    second = FakeConnector("s", ["a"])
    catalog = Catalog([second], cache=cache, fingerprints={"s": "fp"}, eager=["s"])
    await catalog.load()
    assert second.listed == 0 and second.started == 1
    assert [spec.name for spec in catalog.specs()] == ["a"]
    changed = FakeConnector("s", ["a", "b"])
    catalog = Catalog([changed], cache=cache, fingerprints={"s": "other"})
    await catalog.load()
    assert changed.listed == 1 and len(catalog.specs()) == 2


async def test_list_changed_refreshes_one_server_and_tells_listeners():
    cache = MemoryDefinitionCache()
    one, two = FakeConnector("one", ["a"]), FakeConnector("two", ["x"])
    catalog = Catalog([one, two], cache=cache, fingerprints={"one": "f", "two": "g"})
    await catalog.load()
    refreshed = asyncio.Event()
    catalog.add_listener(lambda server: refreshed.set())
    one.tools = ["a", "b"]
    one.announce_change()
    async with asyncio.timeout(5):
        await refreshed.wait()
    assert [s.name for s in catalog.server_specs("one")] == ["a", "b"]
    assert (one.listed, two.listed) == (2, 1)
    assert [s.name for s in cache.get("one", "f") or []] == ["a", "b"]
    assert catalog.version == 1


async def test_filtered_connector_and_listener_attachment():
    inner = FakeConnector("fs", ["read_file", "write_file", "read_dir"])
    catalog = Catalog([FilteredConnector(inner, ["read_*"])])
    await catalog.load()
    assert [s.name for s in catalog.specs()] == ["read_file", "read_dir"]
    assert len(inner.callbacks) == 1  # the filter passed the catalog's listener through
    with pytest.raises(ToolNotFoundError):
        await catalog.call("fs", "write_file", {})


async def test_real_mcp_and_python_connectors(fake_server_argv):
    def double(x: int) -> int:
        """Twice x."""
        return 2 * x

    mcp = MCPConnector("fake", StdioTarget(fake_server_argv[0], fake_server_argv[1:]))
    catalog = Catalog([mcp, PythonConnector("py", [double])])
    try:
        assert await catalog.load() == {}
        assert (await catalog.call("py", "double", {"x": 4})).value == 8
        assert (await catalog.call("fake", "add", {"a": 1, "b": 2})).value == 3
        refreshed = asyncio.Event()
        catalog.add_listener(lambda server: refreshed.set())
        await catalog.call("fake", "grow", {})
        async with asyncio.timeout(10):
            await refreshed.wait()
        assert (await catalog.call("fake", "extra", {})).value == "extra!"
    finally:
        await catalog.aclose()

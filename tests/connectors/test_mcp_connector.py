"""MCPConnector against a small MCP server of our own over stdio (2026-07-28 protocol)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time

import pytest

from codemode.connectors.base import BaseConnector
from codemode.connectors.mcp import (
    MCPConnector,
    StdioTarget,
    tool_result_from_mcp,
    tool_spec_from_mcp,
)
from codemode.errors import ToolError, UpstreamUnavailableError
from codemode.sdk_compat import tolerate_invalid_structured_content

pytestmark = pytest.mark.anyio


def fake(argv: list[str], **kwargs) -> MCPConnector:
    return MCPConnector("fake", StdioTarget(argv[0], argv[1:], **kwargs), start_timeout_s=20)


async def wait_until(predicate, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def test_lists_calls_and_keeps_one_process(fake_server_argv):
    connector = fake(fake_server_argv)
    assert isinstance(connector, BaseConnector)
    try:
        names = [spec.name for spec in await connector.list_tools()]
        assert {"add", "env", "crash", "grow"} <= set(names)
        first_pid = connector.pid
        for a in range(5):
            result = await connector.call_tool("add", {"a": a, "b": 2})
            assert result.value == a + 2 and not result.is_error
        assert connector.pid == first_pid and connector.starts == 1
        assert (await connector.call_tool("pid", {})).value == first_pid
    finally:
        await connector.aclose()
    assert first_pid is not None and not alive(first_pid)


async def test_child_gets_allowlisted_environment_plus_its_own(fake_server_argv, monkeypatch):
    monkeypatch.setenv("CODEMODE_TEST_SECRET", "do-not-leak")
    connector = fake(fake_server_argv, env={"GIVEN": "yes"})
    try:
        leaked = await connector.call_tool("env", {"name": "CODEMODE_TEST_SECRET"})
        given = await connector.call_tool("env", {"name": "GIVEN"})
        path = await connector.call_tool("env", {"name": "PATH"})
    finally:
        await connector.aclose()
    assert leaked.value == ""
    assert given.value == "yes"
    assert path.value == os.environ["PATH"]


async def test_crash_during_call_then_restart(fake_server_argv):
    connector = fake(fake_server_argv)
    try:
        await connector.start()
        with pytest.raises(UpstreamUnavailableError, match="fake server starting"):
            await connector.call_tool("crash", {})
        result = await connector.call_tool("add", {"a": 1, "b": 1})
        assert result.value == 2
        assert connector.starts == 2
    finally:
        await connector.aclose()


async def test_killed_child_is_restarted_on_next_call(fake_server_argv):
    connector = fake(fake_server_argv)
    try:
        await connector.start()
        pid = connector.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await wait_until(lambda: not connector.connected)
        result = await connector.call_tool("add", {"a": 2, "b": 3})
        assert result.value == 5
        assert connector.pid not in (None, pid)
    finally:
        await connector.aclose()


async def test_dead_upstream_fails_fast_with_clear_error(tmp_path):
    script = tmp_path / "dies.py"
    script.write_text(
        "import sys; print('cannot start: missing token', file=sys.stderr); sys.exit(1)"
    )
    connector = MCPConnector("dead", StdioTarget(sys.executable, [str(script)]))
    started = time.monotonic()
    with pytest.raises(UpstreamUnavailableError) as info:
        await connector.call_tool("anything", {})
    assert time.monotonic() - started < 5
    assert "'dead' could not start" in str(info.value)
    assert "missing token" in str(info.value)
    # A second failure within the backoff window does not even try to spawn again.
    with pytest.raises(UpstreamUnavailableError):
        await connector.list_tools()
    with pytest.raises(UpstreamUnavailableError, match="next restart attempt"):
        await connector.list_tools()
    assert connector.starts == 2
    await connector.aclose()


async def test_missing_command_is_reported():
    connector = MCPConnector("ghost", StdioTarget("/nonexistent/mcp-server"))
    with pytest.raises(UpstreamUnavailableError, match="command not found"):
        await connector.start()
    await connector.aclose()


async def test_slow_tool_times_out_without_hanging(fake_server_argv):
    connector = MCPConnector(
        "fake", StdioTarget(fake_server_argv[0], fake_server_argv[1:]), call_timeout_s=0.5
    )
    try:
        with pytest.raises(ToolError, match=r"did not answer within 0\.5 s"):
            await connector.call_tool("slow", {"seconds": 30})
        assert (await connector.call_tool("add", {"a": 1, "b": 1})).value == 2
    finally:
        await connector.aclose()


async def test_tools_list_changed_reaches_the_callback(fake_server_argv):
    changed = asyncio.Event()
    connector = fake(fake_server_argv)
    connector.on_tools_changed(lambda server: changed.set())
    try:
        await connector.list_tools()
        assert (await connector.call_tool("grow", {})).value == "grown"
        async with asyncio.timeout(5):
            await changed.wait()
        assert "extra" in [spec.name for spec in await connector.list_tools()]
    finally:
        await connector.aclose()


async def test_aclose_stops_child_and_later_calls_fail(fake_server_argv):
    connector = fake(fake_server_argv)
    await connector.start()
    pid = connector.pid
    await connector.aclose()
    assert pid is not None and not alive(pid)
    with pytest.raises(UpstreamUnavailableError, match="shut down"):
        await connector.call_tool("add", {"a": 1, "b": 1})


# --- conversions ---------------------------------------------------------------------------------


def test_tool_spec_from_mcp_maps_annotations():
    import mcp_types as t

    tool = t.Tool(
        name="delete_file",
        description="Delete a file.",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
        output_schema={"type": "object"},
        annotations=t.ToolAnnotations(title="Delete", read_only_hint=False, destructive_hint=True),
    )
    spec = tool_spec_from_mcp("fs", tool)
    assert (spec.server, spec.name, spec.description) == ("fs", "delete_file", "Delete a file.")
    assert spec.read_only is False and spec.destructive is True and spec.title == "Delete"
    assert spec.output_schema == {"type": "object"}
    assert spec.input_schema["properties"]["path"] == {"type": "string"}


def test_tool_result_from_mcp_prefers_structured_then_text():
    import mcp_types as t

    text = t.TextContent(type="text", text='{"a": [1, 2]}')
    assert tool_result_from_mcp(t.CallToolResult(content=[text])).value == '{"a": [1, 2]}'
    decoded = tool_result_from_mcp(t.CallToolResult(content=[text]), decode_json=True)
    assert decoded.value == {"a": [1, 2]}
    plain = t.TextContent(type="text", text="42")
    assert tool_result_from_mcp(t.CallToolResult(content=[plain])).value == "42"
    both = t.CallToolResult(content=[text], structured_content={"b": 1})
    assert tool_result_from_mcp(both).value == {"b": 1}
    image = t.ImageContent(type="image", data="aGk=", mime_type="image/png")
    many = tool_result_from_mcp(t.CallToolResult(content=[plain, image]))
    assert many.value == ["42", {"type": "image", "mime_type": "image/png", "data": "aGk="}]
    error = tool_result_from_mcp(t.CallToolResult(content=[plain], is_error=True))
    assert error.is_error and error.error_message == "42"
    assert tool_result_from_mcp(t.CallToolResult(content=[])).value is None


def test_text_beside_structured_content_is_not_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    import mcp_types as t

    from codemode.connectors import mcp_results

    decoded: list[str] = []
    monkeypatch.setattr(mcp_results, "_json_or_text", lambda text: decoded.append(text) or text)
    rows = [{"id": index, "name": f"row {index}"} for index in range(3)]
    text = t.TextContent(type="text", text=json.dumps(rows))  # the same rows, as SDKs write both
    both = t.CallToolResult(content=[text], structured_content={"result": rows})
    assert tool_result_from_mcp(both, decode_json=True, unwrap=True).value == rows
    assert tool_result_from_mcp(both, decode_json=True).value == {"result": rows}
    assert decoded == []  # a MB of records would be parsed and thrown away
    alone = tool_result_from_mcp(t.CallToolResult(content=[text]), decode_json=True)
    assert alone.value == text.text and decoded == [text.text]  # the spy: text alone is read


async def test_invalid_structured_content_falls_back_to_text():
    import mcp_types as t

    class Session:
        async def validate_tool_result(self, name, result):
            raise RuntimeError("Invalid structured content returned by tool x")

    class Client:
        session = Session()

    client = Client()
    told: list[tuple[str, str]] = []
    tolerate_invalid_structured_content(client, lambda *args: told.append(args))  # type: ignore[arg-type]
    result = t.CallToolResult(
        content=[t.TextContent(type="text", text="fallback")], structured_content={"bad": 1}
    )
    await client.session.validate_tool_result("x", result)
    assert tool_result_from_mcp(result).value == "fallback"
    assert told == [("x", "Invalid structured content returned by tool x")]

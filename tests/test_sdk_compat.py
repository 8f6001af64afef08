"""Every SDK and uvicorn internal in ``codemode.sdk_compat``, run against the installed versions.

When a release moves one of them, the test for it fails with a message naming the internal and
the module to adapt, instead of the gateway or a connector misbehaving quietly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from codemode import sdk_compat
from codemode.connectors.jsonrpc import parse_jsonrpc
from codemode.errors import IncompatibleDependencyError

pytestmark = pytest.mark.anyio

ADAPT = "the installed SDK changed: adapt src/codemode/sdk_compat.py"


def probe_server(record: list[Any]) -> Any:
    """A real low-level SDK server whose one tool breaks its own output schema."""
    from mcp import types
    from mcp.server.lowlevel import Server

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        tool = types.Tool(name="probe", input_schema={"type": "object"}, output_schema=schema)
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        record.append((sdk_compat.connection_key(ctx), ctx.session))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text='{"n": "seven"}')],
            structured_content={"n": "seven"},
        )

    return Server("probe", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_the_sdk_still_validates_where_the_lenient_check_hooks_in():
    from mcp import Client

    server = probe_server([])
    async with Client(server) as client:
        with pytest.raises(RuntimeError, match="Invalid structured content"):
            await client.call_tool("probe", {})
        told: list[tuple[str, str]] = []
        sdk_compat.tolerate_invalid_structured_content(client, lambda *a: told.append(a))
        result = await client.call_tool("probe", {})
    assert result.structured_content is None, f"{ADAPT}: ClientSession.validate_tool_result"
    assert result.content[0].text == '{"n": "seven"}'
    assert [tool for tool, _ in told] == ["probe"], f"{ADAPT}: validate_tool_result not called"
    assert "Invalid structured content" in told[0][1]


async def test_tolerating_fails_loudly_without_validate_tool_result():
    class Session:
        pass

    class Client:
        session = Session()

    with pytest.raises(IncompatibleDependencyError, match="validate_tool_result") as info:
        sdk_compat.tolerate_invalid_structured_content(Client(), lambda *a: None)  # type: ignore[arg-type]
    assert "sdk_compat.py" in str(info.value)


async def test_connection_key_is_stable_per_connection_and_not_per_request(caplog):
    from mcp import Client

    seen: list[Any] = []
    server = probe_server(seen)
    tolerate = sdk_compat.tolerate_invalid_structured_content
    with caplog.at_level(logging.WARNING, logger="codemode.sdk_compat"):
        for _ in range(2):  # two connections (2025-era clients: one per conversation)
            async with Client(server, mode="legacy") as client:
                tolerate(client, lambda *a: None)
                await client.call_tool("probe", {})
                await client.call_tool("probe", {})
    assert not caplog.records, f"{ADAPT}: ServerSession._connection is gone"
    (first, proxy1), (again, proxy2), (other, _), (other_again, _) = seen
    assert proxy1 is not proxy2  # why the key is needed: ctx.session is per request
    assert first is again, f"{ADAPT}: ServerSession._connection is not per connection"
    assert other is other_again and other is not first


def test_the_transport_streams_type_is_where_the_connectors_import_it_from():
    import mcp.client._transport as transport

    assert hasattr(transport, "TransportStreams"), f"{ADAPT}: mcp.client._transport moved"


async def test_uvicorn_server_leaves_signal_handlers_alone():
    import uvicorn

    async def app(scope: Any, receive: Any, send: Any) -> None:
        return None  # never called: the test only starts and stops the server

    def config() -> uvicorn.Config:
        return uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")

    async def handler_while_serving(server: uvicorn.Server) -> Any:
        task = asyncio.create_task(server.serve())
        try:
            async with asyncio.timeout(20):
                while not server.started:
                    await asyncio.sleep(0.01)
            return signal.getsignal(signal.SIGTERM)
        finally:
            server.should_exit = True
            async with asyncio.timeout(20):
                await task

    before = signal.getsignal(signal.SIGTERM)
    # The control: plain uvicorn installs its handler through capture_signals.
    plain = uvicorn.Server(config())
    assert await handler_while_serving(plain) == plain.handle_exit
    assert signal.getsignal(signal.SIGTERM) == before
    quiet = sdk_compat.uvicorn_server(config())
    assert await handler_while_serving(quiet) == before, f"{ADAPT}: uvicorn capture_signals"


def test_one_http_client_stack():
    """codemode's HTTP clients are the SDK's httpx2; plain httpx is never imported."""
    code = (
        "import sys\n"
        "import codemode.connectors.openapi, codemode.connectors.openapi_spec\n"
        "import codemode.connectors.mcp, codemode.gateway.server, codemode.sdk_compat\n"
        "import mcp.client.streamable_http\n"
        "client = codemode.sdk_compat.mcp_http_client({'X-Test': '1'})\n"
        "print(type(client).__module__.split('.')[0], client.headers['x-test'],"
        " client.timeout.read, 'httpx' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert out == ["httpx2", "1", "300.0", "False"]


async def test_an_anyio_process_still_holds_the_event_loops_transport_where_it_is_closed():
    import anyio

    process = await anyio.open_process([sys.executable, "-c", "pass"])
    try:
        transport = getattr(getattr(process, "_process", None), "_transport", None)
        assert callable(getattr(transport, "close", None)), (
            "anyio's Process no longer keeps the asyncio transport at _process._transport: "
            "adapt close_subprocess_transport in src/codemode/sdk_compat.py"
        )
        await process.wait()
        sdk_compat.close_subprocess_transport(process)
        assert transport.is_closing()  # type: ignore[union-attr]
    finally:
        await process.aclose()


async def test_an_anyio_process_still_shows_its_pipes_ends_where_they_are_grown():
    import stat

    import anyio

    process = await anyio.open_process([sys.executable, "-c", "import sys; sys.stdin.read()"])
    try:
        ends = [sdk_compat.subprocess_pipe_fd(process, fd) for fd in (0, 1)]
        assert None not in ends, (
            "anyio's Process no longer shows its pipes through _process._transport: "
            "adapt subprocess_pipe_fd in src/codemode/sdk_compat.py"
        )
        assert ends[0] != ends[1]
        assert all(stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in ends if fd is not None)
        assert sdk_compat.subprocess_pipe_fd(object(), 0) is None
    finally:
        await process.aclose()


HTTP_MESSAGES = [
    b'{"jsonrpc": "2.0", "id": 4, "result": {"content": [{"type": "text", "text": "'
    + b"x" * 300_000
    + b'"}]}}',
    '{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}',
    b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "bad"}}',
]


@pytest.mark.parametrize("data", HTTP_MESSAGES, ids=["response", "notification", "error"])
def test_the_http_client_parses_with_the_adapter_where_the_fast_one_is_put(data: Any):
    import mcp_types
    from mcp.client import streamable_http

    assert sdk_compat.parse_http_messages_fast(parse_jsonrpc), ADAPT
    assert sdk_compat.parse_http_messages_fast(parse_jsonrpc)  # once is enough
    fast = streamable_http.jsonrpc_message_adapter
    assert isinstance(fast, sdk_compat._ParsedFirst)
    expected = mcp_types.jsonrpc_message_adapter.validate_json(data, by_name=False)
    parsed = fast.validate_json(data, by_name=False)
    assert type(parsed) is type(expected) and parsed == expected


def test_what_is_not_json_fails_as_the_http_client_expects():
    from mcp.client import streamable_http
    from pydantic import ValidationError

    sdk_compat.parse_http_messages_fast(parse_jsonrpc)
    with pytest.raises(ValidationError, match="Invalid JSON"):
        streamable_http.jsonrpc_message_adapter.validate_json(b"<html>gateway timeout</html>")
    with pytest.raises(ValidationError):
        streamable_http.jsonrpc_message_adapter.validate_json(b'{"jsonrpc": "2.0"}')


def test_without_the_name_the_sdk_parse_serves_and_says_so(monkeypatch, caplog):
    from mcp.client import streamable_http

    monkeypatch.delattr(streamable_http, "jsonrpc_message_adapter")
    monkeypatch.setattr(sdk_compat, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="codemode.sdk_compat"):
        assert sdk_compat.parse_http_messages_fast(parse_jsonrpc) is False
    assert "jsonrpc_message_adapter" in caplog.text


def test_a_dispatched_response_lets_go_of_its_result_and_nothing_else_changes():
    import mcp_types
    from mcp.shared.message import SessionMessage

    result = {"content": [{"type": "text", "text": "x" * 1000}]}
    response = SessionMessage(mcp_types.JSONRPCResponse(jsonrpc="2.0", id=1, result=result))
    sdk_compat.release_dispatched_response(response)
    assert response.message.result == {}
    assert result["content"][0]["text"] == "x" * 1000  # the request's own dict is untouched
    request = SessionMessage(
        mcp_types.JSONRPCRequest(jsonrpc="2.0", id=2, method="ping", params={"a": 1})
    )
    sdk_compat.release_dispatched_response(request)
    assert request.message.params == {"a": 1}
    for other in (None, ValueError("not a message"), object()):
        sdk_compat.release_dispatched_response(other)

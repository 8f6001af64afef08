"""MCPConnector against real third-party MCP servers (installed by `make third-party`)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator

import pytest

from codemode.connectors.mcp import HTTPTarget, MCPConnector, StdioTarget

pytestmark = [pytest.mark.anyio, pytest.mark.thirdparty]


def stdio(name: str, argv: list[str], **kwargs) -> MCPConnector:
    return MCPConnector(name, StdioTarget(argv[0], argv[1:], **kwargs), start_timeout_s=30)


async def test_everything_over_stdio(third_party_server):
    connector = stdio("everything", third_party_server("everything"))
    try:
        specs = {spec.name: spec for spec in await connector.list_tools()}
        assert {"echo", "get-sum", "get-structured-content"} <= specs.keys()
        assert connector.protocol_version == "2025-11-25"
        assert specs["echo"].read_only is True
        assert (await connector.call_tool("echo", {"message": "hello"})).value == "Echo: hello"
        total = await connector.call_tool("get-sum", {"a": 2, "b": 40})
        assert "42" in total.value
        structured = await connector.call_tool("get-structured-content", {"location": "Chicago"})
        assert isinstance(structured.value, dict) and "temperature" in structured.value
        image = await connector.call_tool("get-tiny-image", {})
        assert any(isinstance(v, dict) and v.get("type") == "image" for v in image.value)
    finally:
        await connector.aclose()


async def test_everything_restarts_after_kill(third_party_server):
    connector = stdio("everything", third_party_server("everything"))
    try:
        await connector.start()
        pid = connector.pid
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)
        async with asyncio.timeout(5):
            while connector.connected:
                await asyncio.sleep(0.01)
        assert (await connector.call_tool("echo", {"message": "again"})).value == "Echo: again"
        assert connector.starts == 2 and connector.pid != pid
    finally:
        await connector.aclose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def everything_http(third_party_server) -> Iterator[str]:
    port = free_port()
    argv = [*third_party_server("everything"), "streamableHttp"]
    process = subprocess.Popen(
        argv,
        env={"PATH": os.environ["PATH"], "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        lines: list[str] = []
        ready = False
        # Bounded wait for the "listening on port" line on stderr.
        deadline = 150  # lines; the server prints a handful before it listens
        assert process.stderr is not None
        import selectors

        selector = selectors.DefaultSelector()
        selector.register(process.stderr, selectors.EVENT_READ)
        while not ready and len(lines) < deadline:
            if not selector.select(timeout=20):
                break
            line = process.stderr.readline()
            if not line:
                break
            lines.append(line)
            ready = "listening on port" in line.lower()
        selector.close()
        if not ready:
            pytest.fail(f"server-everything did not listen: {''.join(lines)}")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
        if process.stderr:
            process.stderr.close()


async def test_everything_over_streamable_http(everything_http):
    connector = MCPConnector("everything", HTTPTarget(everything_http), start_timeout_s=20)
    try:
        names = {spec.name for spec in await connector.list_tools()}
        assert {"echo", "get-sum"} <= names
        assert (await connector.call_tool("echo", {"message": "over http"})).value == (
            "Echo: over http"
        )
        results = await asyncio.gather(
            *(connector.call_tool("echo", {"message": str(i)}) for i in range(10))
        )
        assert [r.value for r in results] == [f"Echo: {i}" for i in range(10)]
    finally:
        await connector.aclose()


async def test_a_large_result_over_streamable_http_is_read_whole_by_the_fast_parse(
    everything_http,
):
    from mcp.client import streamable_http

    from codemode import sdk_compat

    connector = MCPConnector("everything", HTTPTarget(everything_http), start_timeout_s=20)
    try:
        message = "Zoë Ünal, Łódź\n" * 20_000 + "x" * 700_000
        result = await connector.call_tool("echo", {"message": message})
        assert result.value == "Echo: " + message
        # Read by codemode's parse, not the SDK's ``validate_json``.
        assert isinstance(streamable_http.jsonrpc_message_adapter, sdk_compat._ParsedFirst)
    finally:
        await connector.aclose()


async def test_http_upstream_down_is_unavailable():
    from codemode.errors import UpstreamUnavailableError

    connector = MCPConnector(
        "nowhere", HTTPTarget(f"http://127.0.0.1:{free_port()}/mcp"), start_timeout_s=10
    )
    with pytest.raises(UpstreamUnavailableError, match="'nowhere' could not start"):
        await connector.start()
    await connector.aclose()


async def test_filesystem_reads_a_file_we_wrote(third_party_server, tmp_path):
    (tmp_path / "notes.txt").write_text("hello from codemode\n")
    connector = stdio("filesystem", [*third_party_server("filesystem"), str(tmp_path)])
    try:
        names = {spec.name for spec in await connector.list_tools()}
        assert {"read_text_file", "write_file", "list_directory"} <= names
        read = await connector.call_tool("read_text_file", {"path": str(tmp_path / "notes.txt")})
        assert not read.is_error
        content = read.value["content"] if isinstance(read.value, dict) else read.value
        assert "hello from codemode" in content
        written = await connector.call_tool(
            "write_file", {"path": str(tmp_path / "out.txt"), "content": "42"}
        )
        assert not written.is_error and (tmp_path / "out.txt").read_text() == "42"
        outside = await connector.call_tool("read_text_file", {"path": "/etc/hostname"})
        assert outside.is_error and "denied" in (outside.error_message or "").lower()
    finally:
        await connector.aclose()


async def test_memory_creates_and_reads_entities(third_party_server, tmp_path):
    connector = stdio(
        "memory",
        third_party_server("memory"),
        env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
    )
    try:
        assert len(await connector.list_tools()) >= 9
        created = await connector.call_tool(
            "create_entities",
            {
                "entities": [
                    {"name": "Ada", "entityType": "person", "observations": ["wrote programs"]}
                ]
            },
        )
        assert not created.is_error
        graph = await connector.call_tool("read_graph", {})
        entities = graph.value["entities"]
        assert [e["name"] for e in entities] == ["Ada"]
        assert entities[0]["observations"] == ["wrote programs"]
    finally:
        await connector.aclose()


async def test_time_server_current_time(third_party_server):
    connector = stdio("time", [*third_party_server("time"), "--local-timezone", "UTC"])
    try:
        names = {spec.name for spec in await connector.list_tools()}
        assert names == {"get_current_time", "convert_time"}
        now = await connector.call_tool("get_current_time", {"timezone": "Europe/Paris"})
        assert not now.is_error
        assert now.value["timezone"] == "Europe/Paris" and "datetime" in now.value
    finally:
        await connector.aclose()


async def test_git_status_of_a_tmp_repo(third_party_server, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "new.txt").write_text("x")
    connector = stdio("git", third_party_server("git"))
    try:
        names = {spec.name for spec in await connector.list_tools()}
        assert {"git_status", "git_log", "git_add"} <= names
        status = await connector.call_tool("git_status", {"repo_path": str(repo)})
        assert not status.is_error
        text = status.value if isinstance(status.value, str) else json.dumps(status.value)
        assert "new.txt" in text
    finally:
        await connector.aclose()

"""codemode's stdio transport: lines split once, large results whole, children stopped."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from mcp.shared.message import SessionMessage

from codemode.connectors import stdio_transport as transport
from codemode.connectors.mcp import MCPConnector, StdioTarget
from codemode.connectors.stdio_transport import LineSplitter, stdio_transport

pytestmark = pytest.mark.anyio


def test_lines_are_cut_at_newlines_across_chunks():
    splitter = LineSplitter()
    assert splitter.feed(b'{"a": 1}\n{"b"') == [b'{"a": 1}']
    assert splitter.pending == 4
    assert splitter.feed(b": 2}") == []
    assert splitter.feed(b"\n\n{}\nrest") == [b'{"b": 2}', b"", b"{}"]
    assert splitter.pending == 4


def test_a_line_fed_byte_by_byte_and_a_character_cut_in_two_come_out_whole():
    text = '{"name": "Zoë Ünal", "city": "Tōkyō"}\n'.encode()
    splitter = LineSplitter()
    lines = [line for byte in text for line in splitter.feed(bytes([byte]))]
    assert lines == [text[:-1]] and splitter.pending == 0
    assert json.loads(lines[0])["city"] == "Tōkyō"


def test_a_ten_megabyte_line_in_64_kib_reads_keeps_only_its_unfinished_part():
    line = b'"' + b"x" * (10 << 20) + b'"'
    splitter = LineSplitter()
    chunks = [line[i : i + 65536] for i in range(0, len(line), 65536)]
    for chunk in chunks:
        assert splitter.feed(chunk) == []
    assert splitter.pending == len(line)
    assert splitter.feed(b"\nnext") == [line] and splitter.pending == 4


def test_any_cutting_of_a_stream_gives_its_lines_whole_and_in_order():
    rng = random.Random(11)
    text = b"\n".join(
        [b"", b"{}", b"x" * 300_000, "é…€".encode() * 999, b"", b"", b"tail" * 5000, b"end"]
    )
    for _ in range(12):
        splitter, lines, at = LineSplitter(), [], 0
        while at < len(text):
            size = rng.choice([1, 7, 4096, 65536, 1 << 20])
            lines += splitter.feed(text[at : at + size])
            at += size
        assert lines == text.split(b"\n")[:-1]
        assert splitter.pending == len(b"end")
        assert splitter.feed(b"\n") == [b"end"] and splitter.pending == 0


MESSAGES = [
    {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "é" * 9000}]}},
    {"jsonrpc": "2.0", "id": "a-1", "result": {"structuredContent": {"n": 1.5, "x": None}}},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo"}},
    {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": ["\u2028", 2]}},
    {"jsonrpc": "2.0", "id": 9, "error": {"code": -32601, "message": "no", "data": {"a": []}}},
    {"jsonrpc": "2.0", "id": 10**30, "result": {}},
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda message: str(sorted(message)))
def test_a_message_parses_to_what_the_sdk_makes_of_it(message: dict[str, object]):
    import mcp_types

    line = json.dumps(message, ensure_ascii=False).encode()
    parsed = transport.parse_message(line)
    assert isinstance(parsed, SessionMessage)
    expected = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    assert type(parsed.message) is type(expected) and parsed.message == expected


@pytest.mark.parametrize(
    ("line", "shown"),
    [(b"grandchild 4242 says hi", "grandchild 4242"), (b'{"jsonrpc": "2.0"}', "jsonrpc")],
)
def test_a_line_that_is_no_message_is_an_error_that_shows_it(line: bytes, shown: str):
    error = transport.parse_message(line)
    assert isinstance(error, ValueError) and shown in str(error)


RAW_SERVER = textwrap.dedent(
    """
    import json, sys, time
    request = json.loads(sys.stdin.readline())
    reply = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"echo": "é" * 5000}})
    sys.stdout.write("\\n\\nnot json at all\\n")
    data = reply.encode() + b"\\n"
    for i in range(0, len(data), 7):  # the reply in many small writes
        sys.stdout.buffer.write(data[i : i + 7])
        sys.stdout.buffer.flush()
    sys.stdin.read()  # until stdin closes
    """
)


async def test_a_reply_in_many_writes_arrives_as_one_message_after_a_bad_line(tmp_path: Path):
    import mcp_types

    script = tmp_path / "raw.py"
    script.write_text(RAW_SERVER)
    request = mcp_types.JSONRPCRequest(jsonrpc="2.0", id=7, method="ping")
    async with stdio_transport(sys.executable, [str(script)], env=dict(os.environ)) as (
        read,
        write,
    ):
        await write.send(SessionMessage(request))
        with anyio.fail_after(20):
            first = await read.receive()
            second = await read.receive()
    assert isinstance(first, ValueError)  # the line that is not JSON-RPC, reported
    assert isinstance(second, SessionMessage)
    assert second.message.result == {"echo": "é" * 5000}  # type: ignore[union-attr]


STUBBORN_SERVER = textwrap.dedent(
    """
    import signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    sys.stdin.read()
    while True:  # neither stdin's end nor SIGTERM stops it
        time.sleep(0.05)
    """
)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def test_a_server_that_ignores_stdin_and_sigterm_is_killed_on_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(transport, "EXIT_GRACE_S", 0.2)
    monkeypatch.setattr(transport, "KILL_GRACE_S", 0.5)
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN_SERVER)
    pids: list[int] = []
    original = anyio.open_process

    async def recording_open(*args: object, **kwargs: object) -> anyio.abc.Process:
        process = await original(*args, **kwargs)  # type: ignore[arg-type]
        pids.append(process.pid)
        return process

    monkeypatch.setattr(transport.anyio, "open_process", recording_open)
    with anyio.fail_after(20):
        async with stdio_transport(sys.executable, [str(script)], env=dict(os.environ)) as (
            read,
            _write,
        ):
            assert isinstance(await read.receive(), ValueError)  # "ready" is not JSON-RPC
    assert pids and _gone(pids[0])


GRANDPARENT_SERVER = textwrap.dedent(
    """
    import subprocess, sys
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print("grandchild", child.pid, flush=True)
    sys.stdin.read()  # exits when stdin closes; the grandchild keeps stdout open
    """
)


async def test_close_ends_even_when_a_grandchild_holds_stdout(tmp_path: Path):
    script = tmp_path / "grandparent.py"
    script.write_text(GRANDPARENT_SERVER)
    grandchild = 0
    try:
        started = time.monotonic()
        with anyio.fail_after(20):
            async with stdio_transport(sys.executable, [str(script)], env=dict(os.environ)) as (
                read,
                _write,
            ):
                error = await read.receive()
                assert isinstance(error, ValueError)
                found = re.search(r"grandchild (\d+)", str(error))
                assert found is not None
                grandchild = int(found.group(1))
        assert time.monotonic() - started < 15
    finally:
        if grandchild:
            os.kill(grandchild, signal.SIGKILL)


LARGE_ECHO_SERVER = textwrap.dedent(
    """
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("big")

    @server.tool()
    def echo(text: str) -> str:
        '''Return the text.'''
        return text

    @server.tool()
    def make(megabytes: int) -> str:
        '''A string of this many megabytes.'''
        return "0123456789abcdef" * (megabytes << 16)

    server.run()
    """
)


async def test_ten_megabytes_each_way_through_a_real_sdk_server(tmp_path: Path):
    script = tmp_path / "big.py"
    script.write_text(LARGE_ECHO_SERVER)
    connector = MCPConnector("big", StdioTarget(sys.executable, [str(script)]), start_timeout_s=30)
    try:
        made = await connector.call_tool("make", {"megabytes": 10})
        assert made.value == "0123456789abcdef" * (10 << 16)
        text = "ab\u00e9\n" * (5 << 18)  # ~10 MB with newlines and non-ASCII inside the value
        echoed = await connector.call_tool("echo", {"text": text})
        assert echoed.value == text
    finally:
        await connector.aclose()


def _large_values_held(size: int) -> list[str]:
    """What live objects hold a str or bytes of at least ``size`` (frames of suspended
    coroutines included), directly or through a dict or tuple that holds only such values
    (the collector does not track those: ``{"type": "text", "text": ...}``)."""
    import gc

    gc.collect()
    held = []
    for holder in gc.get_objects():
        for value in gc.get_referents(holder):
            inner = value.values() if isinstance(value, dict) else value
            if isinstance(value, dict | tuple) and not gc.is_tracked(value):
                for item in inner:
                    if isinstance(item, str | bytes) and len(item) >= size:
                        held.append(f"{type(holder).__name__} holding one holding {len(item):,}")
            if isinstance(value, str | bytes) and len(value) >= size:
                held.append(f"{type(holder).__name__} holding {len(value):,}")
    return held


async def test_no_message_is_kept_alive_after_it_went_through(tmp_path: Path):
    """A long-lived server's reader and writer keep nothing of the last (large) message: it
    would stay in memory past every session until the next message."""
    script = tmp_path / "big.py"
    script.write_text(LARGE_ECHO_SERVER)
    connector = MCPConnector("big", StdioTarget(sys.executable, [str(script)]), start_timeout_s=30)
    try:
        text = "x" * (3 << 20)
        echoed = await connector.call_tool("echo", {"text": text})
        assert echoed.value == text
        del echoed, text
        assert _large_values_held(3 << 20) == []
    finally:
        await connector.aclose()

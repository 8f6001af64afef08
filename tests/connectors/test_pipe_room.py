"""The pipes to a stdio server grow once a large message passes, and only then, within a cap."""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.connectors import pipe_room
from codemode.connectors.mcp import MCPConnector, StdioTarget
from codemode.connectors.pipe_room import GROWN_BYTES, PipeRoom, grown_pipes

ECHO_SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("big")


@server.tool()
def echo(text: str) -> str:
    '''Return the text.'''
    return text


server.run()
"""

# Pipe sizes count against a per-user limit: ``make test`` runs these again as an ordinary user.
pytestmark = pytest.mark.per_user

linux_only = pytest.mark.skipif(
    not hasattr(fcntl, "F_GETPIPE_SZ"), reason="pipe sizes are a Linux fcntl"
)


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    os.close(read)
    os.close(write)


def room_of(fd: int) -> int:
    return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)


@linux_only
def test_small_messages_leave_the_pipe_as_it_is(pipe: tuple[int, int]) -> None:
    before = room_of(pipe[1])
    room = PipeRoom(pipe[1])
    for size in (10, 4096, before - 1):
        room.passing(size)
    assert room_of(pipe[1]) == before and room.room is None


@linux_only
def test_a_large_message_grows_the_pipe_once_and_release_gives_its_place_back(
    pipe: tuple[int, int],
) -> None:
    before = grown_pipes()
    room = PipeRoom(pipe[1])
    room.passing(3 << 20)
    assert room_of(pipe[0]) == GROWN_BYTES == room.room  # one pipe: both ends see it
    assert grown_pipes() == before + 1
    room.passing(5 << 20)  # once only
    assert grown_pipes() == before + 1
    room.release()
    room.release()
    assert grown_pipes() == before


@linux_only
def test_no_more_pipes_grow_than_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipe_room, "MAX_GROWN", grown_pipes() + 1)
    fds = [os.pipe() for _ in range(2)]
    try:
        rooms = [PipeRoom(write) for _read, write in fds]
        for room in rooms:
            room.passing(1 << 20)
        assert [room_of(write) for _read, write in fds] == [GROWN_BYTES, 1 << 16]
        rooms[0].release()
        grown = PipeRoom(fds[1][1])  # a place is free again
        grown.passing(1 << 20)
        assert room_of(fds[1][1]) == GROWN_BYTES
        grown.release()
    finally:
        for read, write in fds:
            os.close(read)
            os.close(write)


@linux_only
def test_a_pipe_the_kernel_will_not_grow_keeps_its_room_and_no_place(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = fcntl.fcntl

    def refuses(fd: int, command: int, arg: int = 0) -> int:
        if command == fcntl.F_SETPIPE_SZ:
            raise PermissionError(1, "Operation not permitted")  # a user at its limit
        return real(fd, command, arg)

    monkeypatch.setattr(pipe_room.fcntl, "fcntl", refuses)
    before = grown_pipes()
    room = PipeRoom(pipe[1])
    room.passing(2 << 20)
    assert room_of(pipe[1]) == 1 << 16 and grown_pipes() == before


def test_what_is_not_a_pipe_or_not_known_is_left_alone(tmp_path: Path) -> None:
    PipeRoom(None).passing(10 << 20)
    with (tmp_path / "file").open("wb") as file:
        before = grown_pipes()
        PipeRoom(file.fileno()).passing(10 << 20)
        assert grown_pipes() == before


@linux_only
@pytest.mark.anyio
async def test_a_server_that_moves_megabytes_gets_grown_pipes_until_it_closes(
    tmp_path: Path,
) -> None:
    script = tmp_path / "big.py"
    script.write_text(ECHO_SERVER)
    before = grown_pipes()
    connector = MCPConnector("big", StdioTarget(sys.executable, [str(script)]), start_timeout_s=30)
    try:
        assert (await connector.call_tool("echo", {"text": "small"})).value == "small"
        assert grown_pipes() == before  # the handshake and a small call: nothing grows
        text = "x" * (2 << 20)
        assert (await connector.call_tool("echo", {"text": text})).value == text
        assert grown_pipes() == before + 2  # its stdin and its stdout
        assert (await connector.call_tool("echo", {"text": text})).value == text
        assert grown_pipes() == before + 2
    finally:
        await connector.aclose()
    assert grown_pipes() == before

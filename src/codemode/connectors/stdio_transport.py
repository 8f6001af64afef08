"""codemode's own stdio client transport: newline-delimited JSON-RPC with a child process.

The MCP SDK's ``stdio_client`` joins its text buffer with every 64 KiB read and splits the
whole of it again (``(buffer + chunk).split("\\n")``), so one 10 MB result costs about 160
reads that each copy and scan up to 10 MB: quadratic in the message size. Here each byte is
scanned for a newline once and a line is joined from its pieces once (``LineSplitter``), reads
take up to 1 MiB, and a line is parsed straight from its bytes (``jsonrpc.parse_jsonrpc``:
parsed, then validated, ten times faster for a large result). The pipes to a server grow to
1 MiB once a message too large for them passes (``pipe_room``). Everything else follows the
SDK's transport and the MCP lifecycle: the child runs in its own session (its process group is
killed as a whole), shutdown closes stdin, waits, then sends SIGTERM and SIGKILL to the group,
all shielded and bounded.

Only public SDK names are used (``SessionMessage``, the JSON-RPC type adapter); the ends of the
child's pipes come from anyio's internals through ``sdk_compat.subprocess_pipe_fd``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import IO

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from codemode.connectors.jsonrpc import jsonrpc_line, parse_jsonrpc
from codemode.connectors.pipe_room import PipeRoom
from codemode.sdk_compat import close_subprocess_transport, subprocess_pipe_fd

__all__ = ["LineSplitter", "parse_message", "stdio_transport"]

log = logging.getLogger(__name__)

READ_BYTES = 1 << 20
EXIT_GRACE_S = 2.0  # for the child to exit on its own after its stdin closed (as the SDK)
KILL_GRACE_S = 2.0  # after SIGTERM to the group, before SIGKILL
FLUSH_S = 0.5  # for the writer to send what it accepted before stdin closes
_POLL_S = 0.01


class LineSplitter:
    """Complete lines out of byte chunks, scanning each byte once.

    ``feed`` returns the lines that ``chunk`` completed (without their newline); the rest waits
    for the next chunk. The pieces of a line not yet complete are kept as they came and joined
    once, when its newline arrives: a line of megabytes is copied once after it was read (a
    growing buffer, sliced and copied out, cost three copies, each faulting in fresh pages),
    and the work stays linear in the bytes fed."""

    def __init__(self) -> None:
        self._pieces: list[bytes | memoryview] = []
        self._pending = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        end = chunk.find(b"\n")
        if end < 0:
            if chunk:
                self._pieces.append(chunk)
                self._pending += len(chunk)
            return []
        if self._pieces:
            self._pieces.append(memoryview(chunk)[:end])
            lines = [b"".join(self._pieces)]
            self._pieces, self._pending = [], 0
        else:
            lines = [chunk[:end]]
        start = end + 1
        while (end := chunk.find(b"\n", start)) >= 0:
            lines.append(chunk[start:end])
            start = end + 1
        if start < len(chunk):
            self._pieces.append(chunk[start:])
            self._pending = len(chunk) - start
        return lines

    @property
    def pending(self) -> int:
        """Bytes of a line not yet complete."""
        return self._pending


def parse_message(line: bytes) -> SessionMessage | Exception:
    """One JSON-RPC message, or the error that it is not one (handed to the session, as the
    SDK's transport does, which reports it)."""
    try:
        message = parse_jsonrpc(line)
    except ValueError as error:
        log.warning("an MCP server wrote a line that is not a JSON-RPC message: %s", error)
        return error
    return SessionMessage(message)


ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]


@contextlib.asynccontextmanager
async def stdio_transport(
    command: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None = None,
    errlog: IO[str] | None = None,
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """Start ``command`` and speak MCP with it over its stdin and stdout: yields the session's
    (read, write) streams. Raises ``OSError`` when the command cannot be started."""
    process = await anyio.open_process(
        [command, *args],
        env=dict(env),
        cwd=cwd,
        stderr=errlog,
        start_new_session=True,  # its own process group: stopped as a whole
    )
    # No await between the spawn and the task group below: a cancel there would leak the child.
    stdin_room = PipeRoom(subprocess_pipe_fd(process, 0))
    stdout_room = PipeRoom(subprocess_pipe_fd(process, 1))
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    closing = False

    async def read_stdout() -> None:
        assert process.stdout is not None
        splitter = LineSplitter()
        try:
            async with to_session:
                while True:
                    try:
                        chunk = await process.stdout.receive(READ_BYTES)
                    except anyio.EndOfStream:
                        return
                    stdout_room.passing(splitter.pending + len(chunk))
                    lines = splitter.feed(chunk)
                    # The loop's variables would keep the last (megabytes) message alive
                    # until the next one, for as long as the server runs.
                    del chunk
                    while lines:
                        line = lines.pop(0)
                        if not line.strip():
                            continue
                        try:
                            await to_session.send(parse_message(line))
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return  # the session is gone: drain below
                        finally:
                            del line
        except anyio.ClosedResourceError:
            pass  # our shutdown closed stdout under the read
        except (anyio.BrokenResourceError, ConnectionError, OSError):
            if not closing:
                log.exception("reading the MCP server's stdout failed mid-session")
        finally:
            await _drain(process)

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    line = jsonrpc_line(message.message)
                    del message  # nothing of a sent message is kept until the next one
                    stdin_room.passing(len(line))
                    await process.stdin.send(line)
                    del line
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The child may live on with its stdin gone: end the session's reads so that no
            # request waits forever.
            await to_session.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()  # the reader drains from here on: a child blocked writing can exit
        write_stream.close()
        with anyio.move_on_after(FLUSH_S):
            await writer_done.wait()
        await _stop(process)
        for stream in (read_stream, write_stream, to_session, from_session):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(read_stdout)
        group.start_soon(write_stdin)
        try:
            yield read_stream, write_stream
        finally:
            closing = True
            # Bounded, and finished even when the caller is cancelled: else the child leaks.
            with anyio.CancelScope(shield=True):
                await shutdown()
            stdin_room.release()
            stdout_room.release()
            group.cancel_scope.cancel()


async def _drain(process: anyio.abc.Process) -> None:
    """Read and drop the child's stdout until it closes, so that a child flushing output on
    its way out never blocks on a full pipe."""
    assert process.stdout is not None
    with (
        anyio.CancelScope(shield=True),
        contextlib.suppress(
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            ConnectionError,
            OSError,
        ),
    ):
        while True:
            await process.stdout.receive(READ_BYTES)


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin, give the child time to exit, then SIGTERM and SIGKILL its process group."""
    assert process.stdin is not None and process.stdout is not None
    await _close(process.stdin)
    if not await _exited(process, EXIT_GRACE_S):
        _signal_group(process, signal.SIGTERM)
        if not await _exited(process, KILL_GRACE_S):
            _signal_group(process, signal.SIGKILL)
            if not await _exited(process, KILL_GRACE_S):
                log.warning("MCP server process %d outlived SIGKILL; leaving it", process.pid)
    await _close(process.stdout)  # a grandchild may hold the pipe open: end the reader anyway
    close_subprocess_transport(process)


def _signal_group(process: anyio.abc.Process, signum: signal.Signals) -> None:
    try:
        os.killpg(process.pid, signum)  # the child leads its own session, so pgid == pid
    except ProcessLookupError:
        return
    except PermissionError:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)


async def _exited(process: anyio.abc.Process, timeout_s: float) -> bool:
    """Whether the child exited within ``timeout_s``. Polls ``returncode``: ``wait()`` also
    waits for the pipes' end, which a grandchild holding them would postpone."""
    with anyio.move_on_after(timeout_s):
        while process.returncode is None:
            await anyio.sleep(_POLL_S)
    return process.returncode is not None


async def _close(stream: anyio.abc.AsyncResource) -> None:
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.aclose()

"""The runner reads what an output pipe holds, in one read of that size."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from codemode.sandbox.pipes import read_pipe


class Pipe:
    """A non-blocking pipe whose ends are closed once each: a descriptor closed twice may by
    then be another thread's (the session's sandbox pool opens pidfds meanwhile)."""

    def __init__(self) -> None:
        self.reader, self.writer = os.pipe()
        os.set_blocking(self.reader, False)

    def close_writer(self) -> None:
        if self.writer >= 0:
            os.close(self.writer)
            self.writer = -1

    def close(self) -> None:
        self.close_writer()
        os.close(self.reader)


@pytest.fixture
def pipe() -> Iterator[Pipe]:
    made = Pipe()
    yield made
    made.close()


def test_what_the_pipe_holds_is_read_at_once(pipe: Pipe) -> None:
    reader, writer = pipe.reader, pipe.writer
    os.write(writer, b"2\n")
    os.write(writer, b"x" * 30_000)
    assert read_pipe(reader, bytearray(4)) == b"2\n" + b"x" * 30_000
    assert read_pipe(reader, bytearray(4), ready=False) is None, "now it holds nothing"


def test_a_pipe_that_holds_nothing_is_left_alone_unless_the_selector_said_readable(
    pipe: Pipe,
) -> None:
    reader = pipe.reader
    assert read_pipe(reader, bytearray(4), ready=False) is None
    assert read_pipe(reader, bytearray(4), ready=True) is None, "empty, not at its end"
    pipe.close_writer()
    assert read_pipe(reader, bytearray(4), ready=False) is None
    assert read_pipe(reader, bytearray(4), ready=True) == b"", "at its end"


def test_what_cannot_be_counted_is_read_in_chunks_to_the_end(
    pipe: Pipe, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, writer = pipe.reader, pipe.writer
    os.write(writer, b"y" * 60_000)

    def no_count(*args: object) -> None:
        raise OSError("no FIONREAD here")

    monkeypatch.setattr("codemode.sandbox.pipes.fcntl.ioctl", no_count)
    assert read_pipe(reader, bytearray(4)) == b"y" * 60_000
    assert read_pipe(reader, bytearray(4)) is None

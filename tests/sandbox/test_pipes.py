"""The runner reads what an output pipe holds, in one read of that size."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from codemode.sandbox.pipes import read_pipe


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    reader, writer = os.pipe()
    os.set_blocking(reader, False)
    yield reader, writer
    for fd in (reader, writer):
        try:
            os.close(fd)
        except OSError:
            pass


def test_what_the_pipe_holds_is_read_at_once(pipe: tuple[int, int]) -> None:
    reader, writer = pipe
    os.write(writer, b"2\n")
    os.write(writer, b"x" * 30_000)
    assert read_pipe(reader, bytearray(4)) == b"2\n" + b"x" * 30_000
    assert read_pipe(reader, bytearray(4), ready=False) is None, "now it holds nothing"


def test_a_pipe_that_holds_nothing_is_left_alone_unless_the_selector_said_readable(
    pipe: tuple[int, int],
) -> None:
    reader, writer = pipe
    assert read_pipe(reader, bytearray(4), ready=False) is None
    assert read_pipe(reader, bytearray(4), ready=True) is None, "empty, not at its end"
    os.close(writer)
    assert read_pipe(reader, bytearray(4), ready=False) is None
    assert read_pipe(reader, bytearray(4), ready=True) == b"", "at its end"


def test_what_cannot_be_counted_is_read_in_chunks_to_the_end(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, writer = pipe
    os.write(writer, b"y" * 60_000)

    def no_count(*args: object) -> None:
        raise OSError("no FIONREAD here")

    monkeypatch.setattr("codemode.sandbox.pipes.fcntl.ioctl", no_count)
    assert read_pipe(reader, bytearray(4)) == b"y" * 60_000
    assert read_pipe(reader, bytearray(4)) is None

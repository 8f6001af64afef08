"""The reader loop offered to the MCP SDK (docs/upstream/mcp-stdio-reader.md) delivers every
line whole, however the text is cut into chunks, and stops when the session is gone."""

from __future__ import annotations

import random
import re
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

PROPOSAL = Path(__file__).parents[2] / "docs" / "upstream" / "mcp-stdio-reader.md"


def proposed_reader() -> Any:
    """The document's code block, as the body of ``reader(stdout, read_stream_writer)``."""
    block = re.search(r"```python\n(.*?)```", PROPOSAL.read_text(encoding="utf-8"), re.S)
    assert block is not None, "the proposal lost its code block"
    source = "async def reader(stdout, read_stream_writer):\n" + textwrap.indent(
        block.group(1), "    "
    )
    namespace: dict[str, Any] = {"anyio": anyio, "_parse_line": lambda line: line}
    exec(compile(source, str(PROPOSAL), "exec"), namespace)  # our own document
    return namespace["reader"]


class Chunks:
    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks

    def __aiter__(self) -> Any:
        return self._each()

    async def _each(self) -> Any:
        for chunk in self.chunks:
            yield chunk


class Writer:
    def __init__(self, gone_after: int | None = None) -> None:
        self.lines: list[str] = []
        self.gone_after = gone_after

    async def send(self, line: str) -> None:
        if self.gone_after is not None and len(self.lines) >= self.gone_after:
            raise anyio.ClosedResourceError
        self.lines.append(line)


def cut(text: str, rng: random.Random) -> list[str]:
    chunks, at = [], 0
    while at < len(text):
        size = rng.choice([1, 2, 7, 64, 4096, 65536])
        chunks.append(text[at : at + size])
        at += size
    return chunks


@pytest.mark.parametrize("seed", range(8))
def test_every_line_arrives_whole_however_it_is_cut(seed: int) -> None:
    rng = random.Random(seed)
    lines = ["", "x" * 300_000, '{"jsonrpc":"2.0"}', "é€😀" * 1000, "\r", "last"]
    text = "\n".join(lines) + "\n" + "a partial line without its newline"
    writer = Writer()
    anyio.run(proposed_reader(), Chunks(cut(text, rng)), writer)
    assert writer.lines == lines


def test_the_reader_stops_when_the_session_is_gone() -> None:
    writer = Writer(gone_after=2)
    anyio.run(proposed_reader(), Chunks(["a\nb\nc\nd\n"]), writer)
    assert writer.lines == ["a", "b"]

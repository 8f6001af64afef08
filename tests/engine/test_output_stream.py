"""``Codemode.execute(on_output=...)``: output reaches the caller while the code still runs,
through the same privacy net as the result."""

from __future__ import annotations

import threading

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.engine.output import ScannedOutput

BOUND_S = 30


class Recorder:
    """An on_output callback that remembers what came, and when a line was seen."""

    def __init__(self, watch_for: bytes) -> None:
        self.events: list[tuple[str, bytes]] = []
        self.watch_for = watch_for
        self.seen = threading.Event()

    def __call__(self, stream: str, data: bytes) -> None:
        self.events.append((stream, data))
        if self.watch_for in b"".join(d for s, d in self.events if s == stream):
            self.seen.set()

    def text(self, stream: str) -> str:
        return b"".join(d for s, d in self.events if s == stream).decode()


async def test_output_arrives_before_the_execution_ends(engine_config: CodemodeConfig):
    recorder = Recorder(b"first\n")

    def wait_for_first() -> bool:
        """Block until the caller has seen the first line (the code is still running)."""
        return recorder.seen.wait(BOUND_S)

    catalog = Catalog([PythonConnector("gate", [wait_for_first])])
    code = (
        "import sys\nfrom servers import gate\n"
        "print('first')\nprint('to stderr', file=sys.stderr)\n"
        "print('seen while running:', gate.wait_for_first())\n"
    )
    async with Codemode(engine_config, catalog=catalog, semantic=False) as engine:
        result = await engine.execute(code, on_output=recorder)
    assert result.status == "ok", result.render_text()
    assert recorder.text("stdout") == "first\nseen while running: True\n"
    assert recorder.text("stderr") == "to stderr\n"
    assert result.stdout == recorder.text("stdout")


async def test_streamed_output_passes_the_privacy_net(engine: Codemode):
    recorder = Recorder(b"\n")
    code = "print('write to ada@example.com today')"
    result = await engine.execute(code, on_output=recorder)
    streamed = recorder.text("stdout")
    assert "ada@example.com" not in streamed
    assert "ada@example.com" not in result.stdout
    assert streamed == result.stdout  # the same token for the same value


async def test_a_failing_callback_does_not_fail_the_execution(engine: Codemode):
    def broken(stream: str, data: bytes) -> None:
        raise BrokenPipeError("the reader went away")

    result = await engine.execute("print('still here')", on_output=broken)
    assert (result.status, result.stdout) == ("ok", "still here\n")


def test_scanned_output_scans_whole_lines_only():
    seen: list[tuple[str, bytes]] = []
    scanned = ScannedOutput(lambda stream, data: seen.append((stream, data)), str.upper)
    scanned("stdout", b"ab")
    scanned("stdout", b"c\nde")
    scanned("stderr", b"x\n")
    assert seen == [("stdout", b"ABC\n"), ("stderr", b"X\n")]
    scanned.flush()
    assert seen[-1] == ("stdout", b"DE")


def test_scanned_output_bounds_a_line_that_never_ends():
    seen: list[bytes] = []
    scanned = ScannedOutput(lambda stream, data: seen.append(data), lambda text: text)
    scanned("stdout", b"x" * 70_000)
    assert [len(chunk) for chunk in seen] == [70_000]


pytestmark = pytest.mark.anyio

"""Output of the code shown on a terminal: colours pass, every other control is shown."""

from __future__ import annotations

import io

import pytest

from codemode.agent.live import LivePrinter
from codemode.terminal_text import for_terminal, text_for_terminal


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (b"\x1b[1;31mbold red\x1b[0m", b"\x1b[1;31mbold red\x1b[0m"),
        (b"\x1b]52;c;aGk=\x07", b"\\x1b]52;c;aGk=\\x07"),  # clipboard write (OSC 52)
        (b"\x1b]0;title\x1b\\", b"\\x1b]0;title\\x1b\\"),  # window title, ST-terminated
        (b"\x1b[2J\x1b[H", b"\\x1b[2J\\x1b[H"),  # clear the screen, move the cursor
        (b"\x1bP+q\x1b\\", b"\\x1bP+q\\x1b\\"),  # a device control string
        ("\x9b2J".encode(), b"\\u009b2J"),  # CSI as one C1 character
        (b"\x1b[31", b"\\x1b[31"),  # a colour cut off at the end of a chunk
        (b"a\tb\r\nc\x08d", b"a\tb\r\nc\x08d"),  # tab, CR, newline, backspace pass
        (b"\x00\x05\x7f", b"\\x00\\x05\\x7f"),
        ("naïve 日本".encode(), "naïve 日本".encode()),
        (b"\xff\xfe", b"\xff\xfe"),  # not UTF-8: not a control either, left as it is
    ],
)
def test_controls_are_shown_and_colours_kept(raw: bytes, shown: bytes) -> None:
    assert for_terminal(raw) == shown


def test_text_with_lone_surrogates() -> None:
    assert text_for_terminal("name\udcff\x1b]0;x\x07") == "name\ufffd\\x1b]0;x\\x07"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_live_printer_shows_escapes_on_a_terminal_only() -> None:
    terminal, pipe = _Terminal(), io.StringIO()
    for out in (terminal, pipe):
        LivePrinter(out)._print("result \x1b]52;c;aGk=\x07")
    assert terminal.getvalue() == "result \\x1b]52;c;aGk=\\x07\n"
    assert pipe.getvalue() == "result \x1b]52;c;aGk=\x07\n"

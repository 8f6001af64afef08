"""Output of the code made harmless for a terminal.

The code (an agent's, or a prompt injection's) chooses every byte it prints. Written raw to a
terminal, escape sequences could set the clipboard (OSC 52), rewrite the window title, hide
text, or move the cursor to fake codemode's own messages. On a terminal, colours (SGR) pass;
every other control character but newline, tab, carriage return and backspace is shown as an
escape (``\\x1b``). Output to a pipe or a file is left byte for byte as the code wrote it.

What a person must read exactly (an approval) goes through ``shown_exactly`` instead: there
every control, bidi override (RLO, LRO, isolates), zero-width and other invisible format
character is shown as an escape, so text cannot hide or reorder what it says.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["for_terminal", "shown_exactly", "text_for_terminal"]

_CONTROLS = re.compile(
    rb"(\x1b\[[0-9;:]{0,64}m)"  # a colour or text style: kept
    rb"|([\x00-\x07\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f])"  # C0 and C1 controls: shown
)


def _shown(match: re.Match[bytes]) -> bytes:
    if match.group(1) is not None:
        return match.group(1)
    control = match.group(2)
    if len(control) == 2:  # a C1 control, UTF-8 encoded
        return b"\\u%04x" % ord(control.decode("utf-8"))
    return b"\\x%02x" % control[0]


def for_terminal(data: bytes) -> bytes:
    """``data`` with every control sequence but colours shown instead of obeyed.

    A sequence cut between two chunks is shown too (never half obeyed)."""
    return _CONTROLS.sub(_shown, data)


def text_for_terminal(text: str) -> str:
    """``for_terminal`` for text (a file name the code chose, say)."""
    return for_terminal(text.encode("utf-8", "surrogateescape")).decode("utf-8", "replace")


# Controls (Cc), format characters (Cf: bidi overrides and isolates, zero-width space and
# joiners, BOM, soft hyphen, tags), line and paragraph separators, private use, unassigned.
_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs"})


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100 and unicodedata.category(char) == "Cc":
        return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def shown_exactly(text: str) -> str:
    """``text`` with every character that is not visible ink (controls, newlines included;
    bidi and zero-width characters; separators) written as an escape such as ``\\u202e``."""
    return "".join(
        _escape(char) if unicodedata.category(char) in _INVISIBLE else char for char in text
    )

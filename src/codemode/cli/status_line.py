"""A live status line on a terminal while code runs: elapsed time, tool calls, bytes printed.

It is the engine's ``Progress`` callback for the CLI. The line is redrawn in place (``\\r``) and
wiped before any output of the code is written, so the two never mix; off a terminal it
writes nothing.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

__all__ = ["StatusLine"]

_WIPE = "\r\x1b[2K"


class StatusLine:
    def __init__(self, stream: TextIO | None = None, *, width: int = 100) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.enabled = _is_terminal(self.stream)
        self._shown = False
        self._lock = threading.Lock()

    async def __call__(self, progress: float, total: float | None, message: str) -> None:
        """The engine's progress report: show ``message`` in place of the last one."""
        if not self.enabled:
            return
        with self._lock:
            self._write(f"{_WIPE}codemode: {message}"[: self.width + len(_WIPE)])
            self._shown = True

    def clear(self) -> None:
        """Wipe the line (before output, and at the end)."""
        with self._lock:
            if self._shown:
                self._write(_WIPE)
                self._shown = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.enabled = False


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False

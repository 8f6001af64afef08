"""Twins for tests of code built on codemode: stand-ins that record what reached them.

``ManualClock`` is a clock that moves only when the test moves it. ``RecordingInvoker`` is a
``ToolInvoker`` (the seam every wrapper around tool calls plugs into)
that answers from a table and keeps every call, so a test can assert what ran, and how often.
The in-process sandbox twin lives in ``codemode.sandbox.inprocess``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from codemode.errors import ToolError
from codemode.tools import ToolCall

__all__ = ["Answer", "ManualClock", "RecordingInvoker"]

# A fixed value, or a function of the call (which may raise, e.g. ToolError).
Answer = Any | Callable[[ToolCall], Any]


class RecordingInvoker:
    """Answers ``server.tool`` (or just ``tool``) from ``answers``; records every call.

    A tool with no answer raises ``ToolError`` unless ``default`` is given (a value, or a
    function of the call). Thread-safe: calls may arrive from several executions at once.
    """

    _MISSING: Any = object()

    def __init__(
        self, answers: Mapping[str, Answer] | None = None, *, default: Answer = _MISSING
    ) -> None:
        self.answers = dict(answers or {})
        self.default = default
        self.calls: list[ToolCall] = []
        self.timeouts: list[float] = []
        self._lock = threading.Lock()

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        with self._lock:
            self.calls.append(call)
            self.timeouts.append(timeout_s)
        answer = self.answers.get(f"{call.server}.{call.tool}", self._MISSING)
        if answer is self._MISSING:
            answer = self.answers.get(call.tool, self.default)
        if answer is self._MISSING:
            raise ToolError(f"no such tool: {call.server}.{call.tool}")
        return answer(call) if callable(answer) else answer

    def tools_called(self) -> list[str]:
        """``server.tool`` of every call, in order."""
        with self._lock:
            return [f"{call.server}.{call.tool}" for call in self.calls]


class ManualClock:
    """A clock (a ``Callable[[], float]``, as ``time.monotonic``) that moves only when the test
    sets ``now`` or calls ``advance``."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

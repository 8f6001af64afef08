"""The token ledger the operator console charts: per session, what the agent's model took in
through codemode (the code it wrote and every answer it got) against the floor of plain tool
calling (every tool definition of the catalog in context, once per session; tool results,
which tool calling would also carry through the model, are not counted).

Counting loads the o200k tokenizer, about 60 MiB the gateway keeps: the catalog's definitions
are counted when the console first asks, and only a gateway that serves the console keeps a
ledger."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codemode.engine import Codemode

__all__ = ["SessionTokens", "TokenLedger", "definition_tokens"]

_MAX_SESSIONS = 500
_MAX_POINTS = 2000


@dataclass
class SessionTokens:
    session: str
    owner: str | None
    started: float = field(default_factory=time.time)
    calls: int = 0
    used: int = 0


class TokenLedger:
    """Thread-safe; bounded (the oldest sessions and points are dropped)."""

    def __init__(self, definition_tokens: int | Callable[[], int]) -> None:
        # What a tool-calling client would load for the same catalog, once per session: a
        # number, or how to count it (once, when first read).
        self._definitions = definition_tokens
        self._sessions: dict[str, SessionTokens] = {}
        self._points: deque[tuple[float, int]] = deque(maxlen=_MAX_POINTS)
        self._lock = threading.Lock()
        # Its own lock: counting a large catalog takes seconds, which record() must not wait.
        self._definitions_lock = threading.Lock()

    @property
    def definition_tokens(self) -> int:
        with self._definitions_lock:
            if callable(self._definitions):
                self._definitions = self._definitions()
            return self._definitions

    def record(self, session: str | None, owner: str | None, tokens: int) -> None:
        key = session or "(none)"
        with self._lock:
            entry = self._sessions.get(key)
            if entry is None:
                if len(self._sessions) >= _MAX_SESSIONS:
                    del self._sessions[next(iter(self._sessions))]
                entry = self._sessions[key] = SessionTokens(key, owner)
            entry.calls += 1
            entry.used += tokens
            self._points.append((time.time(), tokens))

    def sessions(self, owners: set[str | None] | None = None) -> list[SessionTokens]:
        with self._lock:
            return [
                SessionTokens(e.session, e.owner, e.started, e.calls, e.used)
                for e in self._sessions.values()
                if owners is None or e.owner in owners
            ]

    def points(self) -> list[tuple[float, int]]:
        with self._lock:
            return list(self._points)


def definition_tokens(engine: Codemode) -> int:
    """Every tool of the catalog as an MCP tool definition, in tokens."""
    import json

    from codemode.ledger import mcp_tool_definition
    from codemode.tokens import count_tokens_many

    specs = engine.catalog.specs()
    texts = [json.dumps(mcp_tool_definition(spec), ensure_ascii=False) for spec in specs]
    return sum(count_tokens_many(texts)) if texts else 0

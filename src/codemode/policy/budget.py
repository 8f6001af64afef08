"""Per-session call budgets: calls in total, per tool, and a rate over a sliding minute."""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from fnmatch import fnmatchcase

from codemode.settings.policy import BudgetSettings

__all__ = ["Budget", "BudgetExceededError"]

WINDOW_S = 60.0


class BudgetExceededError(Exception):
    """Raised by ``Budget.acquire``; ``which`` names the budget and ``fix`` how to raise it."""

    def __init__(self, which: str, message: str, fix: str) -> None:
        self.which = which
        self.fix = fix
        super().__init__(message)


class Budget:
    """Counts one session's calls. Thread-safe; ``clock`` is injectable for tests."""

    def __init__(
        self,
        settings: BudgetSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or BudgetSettings()
        self._clock = clock
        self._lock = threading.Lock()
        self._total = 0
        self._by_tool: Counter[str] = Counter()
        self._recent: deque[float] = deque()

    @property
    def total(self) -> int:
        with self._lock:
            return self._total

    def used(self, name: str) -> int:
        with self._lock:
            return self._by_tool[name]

    def limit_for(self, name: str) -> tuple[str, int] | None:
        """The per-tool limit that applies to ``name`` (exact key first, then the first glob)."""
        per_tool = self.settings.per_tool
        if name in per_tool:
            return name, per_tool[name]
        for pattern, limit in per_tool.items():
            if fnmatchcase(name, pattern):
                return pattern, limit
        return None

    def acquire(self, name: str) -> None:
        """Count one call to ``name`` ("server.tool"); when over budget raise and count nothing."""
        settings = self.settings
        with self._lock:
            now = self._clock()
            recent = self._recent
            while recent and recent[0] <= now - WINDOW_S:
                recent.popleft()
            if settings.calls is not None and self._total >= settings.calls:
                raise BudgetExceededError(
                    "calls",
                    f"this session has used all {settings.calls} tool calls of its budget",
                    "raise policy.budget.calls in the config, or start a new session",
                )
            per_tool = self.limit_for(name)
            if per_tool is not None and self._by_tool[name] >= per_tool[1]:
                key, limit = per_tool
                raise BudgetExceededError(
                    "per_tool",
                    f"this session has used all {limit} calls to {name} of its budget",
                    f'raise policy.budget.per_tool."{key}" in the config, or start a new session',
                )
            rate = settings.rate_per_minute
            if rate is not None and len(recent) >= rate:
                wait = max(0.0, recent[0] + WINDOW_S - now)
                raise BudgetExceededError(
                    "rate_per_minute",
                    f"this session made {rate} tool calls in the last minute, its rate limit",
                    f"retry in {wait:.0f} s, or raise policy.budget.rate_per_minute in the config",
                )
            self._total += 1
            self._by_tool[name] += 1
            recent.append(now)

    def refund(self, name: str) -> None:
        """Give back one ``acquire`` of ``name`` whose call never ran (an approval was refused)."""
        with self._lock:
            if self._by_tool[name] <= 0:
                return
            self._total -= 1
            self._by_tool[name] -= 1
            if self._recent:
                self._recent.pop()

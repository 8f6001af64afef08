"""Learning from use in the engine, one ``UsageLog`` per owner.

After an owner searches, the tools its next executions call (among those the search named)
count as uses of that query: +1 when the call succeeded, -0.5 when it failed (``UsageLog``).
Later searches of the same owner add the learned boost (capped, so a clearly better match
stays on top) before the answer is cut. Each owner learns only from its own work: what one
tenant calls never re-orders another's answers, and nothing is written to disk.

Bounded: a few recent queries per owner, a few hundred owners (least recently seen dropped).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from codemode.search.base import Hit
from codemode.search.usage import UsageLog

__all__ = ["OwnerUsage"]

_NOBODY = "\x00anonymous"


@dataclass(frozen=True, slots=True)
class _Searched:
    query: str
    at: float
    named: frozenset[str]  # "server.tool" of every hit the answer named


class OwnerUsage:
    def __init__(
        self,
        *,
        max_owners: int = 256,
        recent_queries: int = 3,
        window_s: float = 900.0,
        capacity: int = 500,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``window_s``: how long after a search the calls still count as its uses."""
        self.max_owners = max_owners
        self.recent_queries = recent_queries
        self.window_s = window_s
        self.capacity = capacity
        self._clock = clock
        self._logs: OrderedDict[str, UsageLog] = OrderedDict()
        self._recent: dict[str, deque[_Searched]] = {}
        self._lock = threading.Lock()

    def rerank(self, owner: str | None, query: str, hits: Sequence[Hit]) -> list[Hit]:
        """``hits`` with what ``owner`` taught added to their scores, best first."""
        with self._lock:
            log = self._logs.get(owner or _NOBODY)
        if log is None or not len(log):
            return list(hits)
        return log.rerank(query, hits)

    def searched(self, owner: str | None, query: str, hits: Sequence[Hit]) -> None:
        """``owner`` was answered ``hits`` for ``query``."""
        named = frozenset(f"{hit.server}.{hit.tool}" for hit in hits)
        if not named:
            return
        key = owner or _NOBODY
        with self._lock:
            self._log(key)
            recent = self._recent.setdefault(key, deque(maxlen=self.recent_queries))
            recent.append(_Searched(query, self._clock(), named))

    def executed(self, owner: str | None, by_tool: Mapping[str, Mapping[str, int]]) -> int:
        """An execution of ``owner`` called these tools (``"server.tool"`` -> calls and
        failures); returns how many uses were learned."""
        key = owner or _NOBODY
        now = self._clock()
        with self._lock:
            recent = [s for s in self._recent.get(key, ()) if now - s.at <= self.window_s]
            log = self._logs.get(key)
        if log is None or not recent:
            return 0
        learned = 0
        for name, counts in by_tool.items():
            server, _, tool = name.partition(".")
            if not tool:
                continue
            succeeded = int(counts.get("calls", 0)) > int(counts.get("failures", 0))
            for search in recent:
                if name in search.named:
                    log.record_use(search.query, server, tool, succeeded)
                    learned += 1
        return learned

    def _log(self, key: str) -> UsageLog:
        """The owner's log (made if new, marked as the most recently seen); under the lock."""
        log = self._logs.get(key)
        if log is None:
            log = self._logs[key] = UsageLog(capacity=self.capacity)
            while len(self._logs) > self.max_owners:
                dropped, _ = self._logs.popitem(last=False)
                self._recent.pop(dropped, None)
        else:
            self._logs.move_to_end(key)
        return log

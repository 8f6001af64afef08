"""The fix memory seam: a Protocol and its in-memory twin (the default keeps the fixes in the
state store: ``codemode.memory.kv``).

One entry per (owner, error signature): the newest fix wins. Bounded per owner (the least
recently seen entries go first). Everything stored has passed the session's privacy scan.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Fix", "FixMemory", "MemoryFixes"]


@dataclass(frozen=True, slots=True)
class Fix:
    owner: str
    signature: str
    diff: str
    recorded: float
    uses: int = 0


class FixMemory(Protocol):
    def remember(self, owner: str, signature: str, diff: str) -> None: ...

    def recall(self, owner: str, signature: str) -> Fix | None:
        """The fix for this error, counting the use; None when there is none."""
        ...

    def entries(self, owner: str) -> list[Fix]: ...

    def forget(self, owner: str, signature: str | None = None) -> int:
        """Remove one entry, or all of an owner's; returns how many."""
        ...

    def close(self) -> None: ...


class MemoryFixes:
    def __init__(self, *, per_owner: int = 200) -> None:
        self.per_owner = per_owner
        self._entries: dict[tuple[str, str], Fix] = {}
        self._lock = threading.Lock()

    def remember(self, owner: str, signature: str, diff: str) -> None:
        with self._lock:
            self._entries.pop((owner, signature), None)
            self._entries[(owner, signature)] = Fix(owner, signature, diff, time.time())
            mine = [key for key in self._entries if key[0] == owner]
            for key in mine[: max(len(mine) - self.per_owner, 0)]:
                del self._entries[key]

    def recall(self, owner: str, signature: str) -> Fix | None:
        with self._lock:
            found = self._entries.pop((owner, signature), None)
            if found is None:
                return None
            used = Fix(found.owner, found.signature, found.diff, found.recorded, found.uses + 1)
            self._entries[(owner, signature)] = used  # most recently seen goes last
            return used

    def entries(self, owner: str) -> list[Fix]:
        with self._lock:
            return [fix for (who, _), fix in self._entries.items() if who == owner]

    def forget(self, owner: str, signature: str | None = None) -> int:
        with self._lock:
            doomed = [k for k in self._entries if k[0] == owner and signature in (None, k[1])]
            for key in doomed:
                del self._entries[key]
            return len(doomed)

    def close(self) -> None:
        return None

"""The fix memory seam: a Protocol, an in-memory twin and the SQLite default.

One entry per (owner, error signature): the newest fix wins. Bounded per owner (the least
recently seen entries go first). Everything stored has passed the session's privacy scan.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from codemode.errors import StateStoreError
from codemode.storage.private import private_sqlite

__all__ = ["Fix", "FixMemory", "MemoryFixes", "SQLiteFixes"]


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


_SCHEMA = """
CREATE TABLE IF NOT EXISTS fixes (
    owner TEXT NOT NULL,
    signature TEXT NOT NULL,
    diff TEXT NOT NULL,
    recorded REAL NOT NULL,
    seen REAL NOT NULL,
    uses INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (owner, signature)
);
"""


class SQLiteFixes:
    def __init__(self, path: Path, *, per_owner: int = 200) -> None:
        self.per_owner = per_owner
        try:
            private_sqlite(path)  # fixes quote the owner's code: theirs only
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as error:
            raise StateStoreError(
                f"cannot open the fix memory {path}: {error}",
                fix="check that gateway.state_dir is writable",
            ) from None
        self._lock = threading.Lock()

    def remember(self, owner: str, signature: str, diff: str) -> None:
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO fixes (owner, signature, diff, recorded, seen) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(owner, signature) DO UPDATE SET diff = excluded.diff, "
                "recorded = excluded.recorded, seen = excluded.seen, uses = 0",
                (owner, signature, diff, now, now),
            )
            self._db.execute(
                "DELETE FROM fixes WHERE owner = ? AND signature NOT IN (SELECT signature FROM "
                "fixes WHERE owner = ? ORDER BY seen DESC LIMIT ?)",
                (owner, owner, self.per_owner),
            )

    def recall(self, owner: str, signature: str) -> Fix | None:
        with self._lock:
            row = self._db.execute(
                "UPDATE fixes SET uses = uses + 1, seen = ? WHERE owner = ? AND signature = ? "
                "RETURNING diff, recorded, uses",
                (time.time(), owner, signature),
            ).fetchone()
        return None if row is None else Fix(owner, signature, row[0], row[1], row[2])

    def entries(self, owner: str) -> list[Fix]:
        with self._lock:
            rows = self._db.execute(
                "SELECT signature, diff, recorded, uses FROM fixes WHERE owner = ? ORDER BY seen",
                (owner,),
            ).fetchall()
        return [Fix(owner, row[0], row[1], row[2], row[3]) for row in rows]

    def forget(self, owner: str, signature: str | None = None) -> int:
        with self._lock:
            if signature is None:
                return self._db.execute("DELETE FROM fixes WHERE owner = ?", (owner,)).rowcount
            return self._db.execute(
                "DELETE FROM fixes WHERE owner = ? AND signature = ?", (owner, signature)
            ).rowcount

    def close(self) -> None:
        with self._lock:
            self._db.close()

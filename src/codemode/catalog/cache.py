"""The definition cache: tool definitions kept across restarts, keyed by server and config hash.

A restart with an unchanged config reads every server's tools from here instead of starting and
listing each upstream. ``SQLiteDefinitionCache`` is the default; ``MemoryDefinitionCache`` is its
twin for tests and for when no state directory can be written. A corrupt database file is moved
aside and rebuilt: the cache is an optimisation and never a reason to fail.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from codemode.errors import StoreVersionError
from codemode.storage.sqlite import Migration, open_database
from codemode.tools import ToolSpec

__all__ = [
    "MIGRATIONS",
    "DefinitionCache",
    "MemoryDefinitionCache",
    "SQLiteDefinitionCache",
    "spec_from_json",
    "spec_to_json",
]

logger = logging.getLogger(__name__)

# A step that changes ToolSpec clears the cached tools: they are listed again once.
MIGRATIONS = (
    Migration(
        1,
        "definitions",
        (
            "CREATE TABLE IF NOT EXISTS definitions ("
            " server TEXT PRIMARY KEY, fingerprint TEXT NOT NULL,"
            " specs TEXT NOT NULL, updated_at REAL NOT NULL)",
        ),
    ),
    Migration(2, "ToolSpec.tags", ("DELETE FROM definitions",)),
    Migration(3, "ToolSpec.open_world", ("DELETE FROM definitions",)),
)
_SPEC_FIELDS = frozenset(field.name for field in dataclasses.fields(ToolSpec))


class DefinitionCache(Protocol):
    def get(self, server: str, fingerprint: str) -> list[ToolSpec] | None:
        """The cached tools of ``server`` if they were stored under ``fingerprint``."""
        ...

    def put(self, server: str, fingerprint: str, specs: Sequence[ToolSpec]) -> None: ...

    def invalidate(self, server: str) -> None: ...

    def close(self) -> None:
        """Release the store (a file handle, a connection); the cache is not used after."""
        ...


def spec_to_json(spec: ToolSpec) -> dict[str, Any]:
    return dataclasses.asdict(spec)


def spec_from_json(data: dict[str, Any]) -> ToolSpec:
    fields = {key: value for key, value in data.items() if key in _SPEC_FIELDS}
    if "tags" in fields:  # JSON has no tuples
        fields["tags"] = tuple(fields["tags"])
    return ToolSpec(**fields)


class MemoryDefinitionCache:
    def __init__(self) -> None:
        self._entries: dict[str, tuple[str, list[ToolSpec]]] = {}

    def get(self, server: str, fingerprint: str) -> list[ToolSpec] | None:
        entry = self._entries.get(server)
        if entry is None or entry[0] != fingerprint:
            return None
        return list(entry[1])

    def put(self, server: str, fingerprint: str, specs: Sequence[ToolSpec]) -> None:
        self._entries[server] = (fingerprint, list(specs))

    def invalidate(self, server: str) -> None:
        self._entries.pop(server, None)

    def close(self) -> None:
        self._entries.clear()


class SQLiteDefinitionCache:
    """One row per server: its config fingerprint and its tools as JSON."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except (sqlite3.DatabaseError, StoreVersionError) as error:
            # A newer codemode's cache too: set aside (never rewritten) and rebuilt.
            self._move_aside(error)
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        # The rollback journal, not WAL: every read reaches the file, so a damaged file is
        # noticed at once and the cache rebuilt.
        db = open_database(
            self.path, MIGRATIONS, what="the definition cache", busy_timeout_s=5.0, wal=False
        )
        try:
            db.execute("SELECT count(*) FROM definitions").fetchone()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _move_aside(self, error: Exception) -> None:
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        logger.warning(
            "definition cache %s is unreadable (%s); moved to %s", self.path, error, aside
        )
        for suffix in ("", "-wal", "-shm", "-journal"):
            source = Path(f"{self.path}{suffix}")
            if source.exists():
                source.replace(Path(f"{aside}{suffix}"))

    def _recover(self, error: Exception) -> None:
        self._db.close()
        self._move_aside(error)
        self._db = self._connect()

    def get(self, server: str, fingerprint: str) -> list[ToolSpec] | None:
        with self._lock:
            try:
                row = self._db.execute(
                    "SELECT fingerprint, specs FROM definitions WHERE server = ?", (server,)
                ).fetchone()
            except sqlite3.DatabaseError as error:
                self._recover(error)
                return None
        if row is None or row[0] != fingerprint:
            return None
        try:
            return [spec_from_json(item) for item in json.loads(row[1])]
        except (ValueError, TypeError) as error:
            logger.warning("cached tools of %r are unreadable (%s); listing again", server, error)
            self.invalidate(server)
            return None

    def put(self, server: str, fingerprint: str, specs: Sequence[ToolSpec]) -> None:
        payload = json.dumps([spec_to_json(spec) for spec in specs], separators=(",", ":"))
        self._write(
            "INSERT OR REPLACE INTO definitions (server, fingerprint, specs, updated_at)"
            " VALUES (?, ?, ?, ?)",
            (server, fingerprint, payload, time.time()),
        )

    def invalidate(self, server: str) -> None:
        self._write("DELETE FROM definitions WHERE server = ?", (server,))

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._lock:
            for attempt in range(2):
                try:
                    self._db.execute(sql, params)
                    self._db.commit()
                    return
                except sqlite3.OperationalError as error:
                    logger.warning("definition cache write failed: %s", error)
                    return
                except sqlite3.DatabaseError as error:
                    if attempt:
                        logger.warning("definition cache write failed: %s", error)
                        return
                    self._recover(error)

    def close(self) -> None:
        with self._lock:
            self._db.close()

"""``SQLiteStore``: the durable tier by default (one file, WAL, safe across threads and
processes). The file and its directory are its owner's only (0600/0700), tightened when an
older version left them readable to others (``codemode.storage.open_database``)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from codemode.errors import StateStoreError
from codemode.state.store import StoredValue
from codemode.storage.sqlite import Migration, open_database

__all__ = ["MIGRATIONS", "SQLiteStore"]

# Step 1 is the schema of the versions before migrations (user_version 0): it creates nothing
# on their files, which then carry on from here.
MIGRATIONS = (
    Migration(
        1,
        "key-value table",
        (
            """CREATE TABLE IF NOT EXISTS kv (
    key TEXT PRIMARY KEY,
    data BLOB NOT NULL,
    expires_at REAL
)""",
            "CREATE INDEX IF NOT EXISTS kv_expiry ON kv (expires_at) WHERE expires_at IS NOT NULL",
        ),
    ),
)


class SQLiteStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._db = open_database(path, MIGRATIONS, what="the state database")
        except (OSError, sqlite3.Error) as error:
            raise StateStoreError(
                f"cannot open the state database {path}: {error}",
                fix="check that gateway.state_dir is writable, or point it elsewhere",
            ) from None
        self._lock = threading.Lock()

    def get(self, key: str) -> StoredValue | None:
        with self._lock:
            row = self._db.execute(
                "SELECT data, expires_at FROM kv WHERE key = ?", (key,)
            ).fetchone()
            if row is None:
                return None
            if row[1] is not None and row[1] <= time.time():
                self._db.execute("DELETE FROM kv WHERE key = ?", (key,))
                return None
            return StoredValue(bytes(row[0]), row[1])

    def set(self, key: str, data: bytes, *, expires_at: float | None = None) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO kv (key, data, expires_at) VALUES (?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET data = excluded.data, "
                "expires_at = excluded.expires_at",
                (key, bytes(data), expires_at),
            )

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._db.execute("DELETE FROM kv WHERE key = ?", (key,)).rowcount > 0

    def incr(self, key: str, by: int = 1) -> int:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT data, expires_at FROM kv WHERE key = ?", (key,)
                ).fetchone()
                live = row is not None and (row[1] is None or row[1] > time.time())
                number = (int(row[0]) if live else 0) + by
                expires = row[1] if live else None
                self._db.execute(
                    "INSERT INTO kv (key, data, expires_at) VALUES (?, ?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET data = excluded.data, "
                    "expires_at = excluded.expires_at",
                    (key, str(number).encode(), expires),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return number

    def delete_prefix(self, prefix: str) -> int:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        with self._lock:
            return self._db.execute(
                "DELETE FROM kv WHERE key LIKE ? ESCAPE '\\'", (escaped + "%",)
            ).rowcount

    def usage(self, prefix: str) -> tuple[int, int]:
        """(keys, bytes of keys and values) of the live keys under ``prefix``."""
        with self._lock:
            # A range on the primary key (LIKE would scan the table).
            row = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(key AS BLOB)) + LENGTH(data)), 0) "
                "FROM kv WHERE key >= ? AND key < ? AND (expires_at IS NULL OR expires_at > ?)",
                (prefix, prefix + "\U0010ffff", time.time()),
            ).fetchone()
        return int(row[0]), int(row[1])

    def purge_expired(self) -> int:
        with self._lock:
            return self._db.execute(
                "DELETE FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?", (time.time(),)
            ).rowcount

    def close(self) -> None:
        with self._lock:
            self._db.close()

"""The audit log in one SQLite file: WAL, an append-only table, safe for threads and processes.

With ``rotation`` settings the file is rotated by size and age and old files are deleted
(``codemode.audit.rotation``); queries read the current file.

Rows cannot be changed or deleted (triggers refuse it). Writers in other processes wait for
each other (busy timeout). A file that turns out to be corrupt is renamed
``<name>.corrupt-<time>-<pid>`` and a new log is started in its place: auditing goes on, and the
old file is kept for whoever investigates.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from codemode.audit.events import AuditEvent, AuditFilter, Outcome
from codemode.audit.rotation import needs_rotation, prune, rotate
from codemode.policy.outcome import Verdict
from codemode.settings.audit import AuditSettings
from codemode.storage.private import private_sqlite
from codemode.storage.sqlite import Migration, open_database

__all__ = ["MIGRATIONS", "SQLiteAuditLog"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Appends between two checks of the file's size and age.
_ROTATION_CHECK_EVERY = 256
_BUSY_TIMEOUT_S = 15.0
_CORRUPT = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB"})
_COLUMNS = (
    "time, session, server, tool, args_digest, decision, duration_ms, outcome, error_code, "
    "message, rule, count"
)
_INSERT = f"INSERT INTO events ({_COLUMNS}) VALUES ({', '.join('?' * 12)})"  # noqa: S608


def _row(event: AuditEvent) -> tuple[Any, ...]:
    return (
        event.time,
        event.session,
        event.server,
        event.tool,
        event.args_digest,
        event.decision,
        event.duration_ms,
        event.outcome,
        event.error_code,
        event.message,
        event.rule,
        event.count,
    )


MIGRATIONS = (
    Migration(
        1,
        "append-only events",
        (
            """CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    session TEXT NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    decision TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    outcome TEXT NOT NULL,
    error_code TEXT,
    message TEXT NOT NULL,
    rule TEXT
)""",
            "CREATE INDEX IF NOT EXISTS events_time ON events (time)",
            "CREATE INDEX IF NOT EXISTS events_session ON events (session, id)",
            """CREATE TRIGGER IF NOT EXISTS events_append_only_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
            """CREATE TRIGGER IF NOT EXISTS events_append_only_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
        ),
    ),
    Migration(
        2,
        "repeated events counted",
        ("ALTER TABLE events ADD COLUMN count INTEGER NOT NULL DEFAULT 1",),
    ),
)


def _is_corruption(error: sqlite3.DatabaseError) -> bool:
    name = getattr(error, "sqlite_errorname", None)
    if name is not None:
        return name in _CORRUPT or name.startswith("SQLITE_CORRUPT")
    text = str(error)
    return "malformed" in text or "not a database" in text


class SQLiteAuditLog:
    """``AuditLog`` over ``path``. One connection per instance, shared by its threads."""

    def __init__(
        self,
        path: Path | str,
        *,
        rotation: AuditSettings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``rotation``: rotate and prune by its sizes and ages (None: one file forever)."""
        self.path = Path(path)
        self.rotation = rotation
        self.clock = clock
        self.recovered: list[Path] = []  # files moved aside because they were corrupt
        self.rotated: list[Path] = []  # files this instance rotated
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None
        self._appends = 0
        with self._lock:
            self._with_recovery(lambda connection: None)
            self._maybe_rotate()

    # --- the AuditLog protocol ----------------------------------------------------------------

    def append(self, event: AuditEvent) -> None:
        row = _row(event)

        def insert(connection: sqlite3.Connection) -> None:
            connection.execute(_INSERT, row)

        with self._lock:
            self._with_recovery(insert)
            self._count_appends(1)

    def append_many(self, events: Sequence[AuditEvent]) -> None:
        """``append`` each of ``events``, in order, in one transaction (all or none)."""
        rows = [_row(event) for event in events]

        def insert(connection: sqlite3.Connection) -> None:
            with connection:  # one transaction: committed, or rolled back on an error
                connection.execute("BEGIN")
                connection.executemany(_INSERT, rows)

        with self._lock:
            self._with_recovery(insert)
            self._count_appends(len(rows))

    def sync(self) -> bool:
        return True  # each append is stored before it returns

    def _count_appends(self, count: int) -> None:
        before, self._appends = self._appends, self._appends + count
        if before // _ROTATION_CHECK_EVERY != self._appends // _ROTATION_CHECK_EVERY:
            self._maybe_rotate()

    def _maybe_rotate(self) -> None:
        """Rotate and prune when the settings say so (called with the lock held)."""
        if self.rotation is None or self._connection is None:
            return
        now = self.clock()
        try:
            due = needs_rotation(self.path, self._connection, self.rotation, now)
        except (OSError, sqlite3.Error) as error:
            log.warning("could not check the audit log %s for rotation: %s", self.path, error)
            return
        if due:
            target = rotate(self.path, self._connection)
            self._disconnect()
            self._identity = None
            if target is not None:
                self.rotated.append(target)
            self._with_recovery(lambda connection: None)
        prune(self.path, self.rotation, now)

    def query(self, filters: AuditFilter | None = None) -> list[AuditEvent]:
        filters = filters or AuditFilter()
        if filters.limit is not None and filters.limit <= 0:
            return []
        where: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("session", filters.session),
            ("decision", filters.decision),
            ("outcome", filters.outcome),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if filters.tool is not None:
            where.append("(server || '.' || tool) GLOB ?")
            params.append(filters.tool.replace("[!", "[^"))
        if filters.since is not None:
            where.append("time >= ?")
            params.append(filters.since)
        if filters.until is not None:
            where.append("time < ?")
            params.append(filters.until)
        # Only fixed column names are formatted in; every value is a parameter.
        sql = f"SELECT {_COLUMNS} FROM events"  # noqa: S608
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC"
        if filters.limit is not None:
            sql += " LIMIT ?"
            params.append(filters.limit)

        def select(connection: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return connection.execute(sql, params).fetchall()

        with self._lock:
            rows = self._with_recovery(select)
        return [_event(row) for row in reversed(rows)]

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __enter__(self) -> SQLiteAuditLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- connection and recovery --------------------------------------------------------------

    def _with_recovery(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``operation``; on a corrupt file move it aside, start afresh and run it again."""
        try:
            return operation(self._connect())
        except sqlite3.DatabaseError as error:
            if _is_corruption(error):
                log.warning("audit log %s is corrupt (%s); starting a new one", self.path, error)
                self._disconnect()
                self._move_aside()
            elif self._replaced():  # another process moved a corrupt file aside under us
                self._disconnect()
            else:
                raise
            return operation(self._connect())

    def _replaced(self) -> bool:
        if self._identity is None:
            return False
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return True
        return self._identity != (stat.st_dev, stat.st_ino)

    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None:
            if not self._replaced():
                return self._connection
            self._disconnect()
        # Created (0600) and known before connecting, so that recovery from a file that is
        # corrupt from the start moves aside this file and never a fresh one another process
        # put in its place.
        stat = private_sqlite(self.path).stat()
        self._identity = (stat.st_dev, stat.st_ino)
        connection = open_database(
            self.path, MIGRATIONS, what="the audit log", busy_timeout_s=_BUSY_TIMEOUT_S
        )
        self._connection = connection
        return connection

    def _disconnect(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self._connection.close()
            self._connection = None

    def _move_aside(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return
        # Another process may already have replaced the corrupt file with a fresh log: leave
        # that one alone.
        if self._identity is not None and self._identity != (stat.st_dev, stat.st_ino):
            self._identity = None
            return
        stamp = time.strftime("%Y%m%dT%H%M%S")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            self.path.rename(target)
            self.recovered.append(target)
        for suffix in ("-wal", "-shm"):
            side = self.path.with_name(self.path.name + suffix)
            with contextlib.suppress(FileNotFoundError):
                side.rename(target.with_name(target.name + suffix))
        self._identity = None


def _event(row: tuple[Any, ...]) -> AuditEvent:
    return AuditEvent(
        time=float(row[0]),
        session=str(row[1]),
        server=str(row[2]),
        tool=str(row[3]),
        args_digest=str(row[4]),
        decision=cast(Verdict, row[5]),
        duration_ms=float(row[6]),
        outcome=cast(Outcome, row[7]),
        error_code=row[8],
        message=str(row[9]),
        rule=row[10],
        count=int(row[11]),
    )

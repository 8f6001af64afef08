"""One way to open a SQLite store: a private file, a busy timeout, WAL, versioned migrations.

``open_database(path, migrations, what=...)``:

- creates the folder (0700) and the file (0600) before SQLite does, and tightens looser modes
  an older version left;
- connects in autocommit mode with a busy timeout, usable from any thread (callers lock);
- switches the file to WAL unless it already is (or the caller wants the rollback journal),
  and sets ``synchronous = NORMAL``;
- applies the migrations the file has not had yet, in order, in one ``BEGIN IMMEDIATE``
  transaction, so that of several processes opening a new file at once exactly one migrates;
  the version reached is kept in ``PRAGMA user_version`` and each step (with the codemode
  version that applied it) in the ``codemode_schema`` table;
- refuses a file whose version is newer than the last migration (a downgrade) with
  ``StoreVersionError``, naming the codemode version that wrote it.

SQLite does not call the busy handler for every lock a journal-mode change needs, so that
change and the migration are retried until ``deadline_s``; past it ``StoreBusyError`` says who
to look for. Any other error (a corrupt file, say) reaches the caller unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from codemode.errors import StoreBusyError, StoreVersionError
from codemode.storage.private import private_sqlite

__all__ = ["SCHEMA_TABLE", "Migration", "latest_version", "open_database"]

T = TypeVar("T")

SCHEMA_TABLE = "codemode_schema"
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_FIRST_PAUSE_S = 0.002
_LONGEST_PAUSE_S = 0.05


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of a store's schema. ``apply`` is SQL statements run in order (one statement
    each: no ``executescript``, which would commit) or a function given the connection, inside
    the migration's transaction. Versions count up from 1 without gaps; a step once released
    never changes (a new step fixes it)."""

    version: int
    name: str
    apply: tuple[str, ...] | Callable[[sqlite3.Connection], None]


def latest_version(migrations: Sequence[Migration]) -> int:
    """The version a file has once every step ran; raises ValueError on a malformed list."""
    versions = [migration.version for migration in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migration versions must be 1, 2, 3, ... in order, not {versions}")
    return len(versions)


def open_database(
    path: Path,
    migrations: Sequence[Migration],
    *,
    what: str,
    busy_timeout_s: float = 15.0,
    deadline_s: float = 30.0,
    wal: bool = True,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> sqlite3.Connection:
    """A connection to ``path`` with every migration applied. ``what`` names the store in
    error messages ("the audit log"). ``wal=False`` keeps SQLite's rollback journal (a
    file with one writer that wants every read to reach the main file). ``clock`` and
    ``pause`` measure and wait out the deadline (injectable for tests)."""
    latest = latest_version(migrations)
    private_sqlite(path)
    connection = sqlite3.connect(
        path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
    )
    try:
        retry = _Retry(path, what, clock() + deadline_s, deadline_s, clock, pause)
        mode = retry(lambda: _journal_mode(connection), "reading its journal mode")
        if wal and mode != "wal":
            retry(lambda: _make_wal(connection), "switching it to WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        if _version(connection) != latest:
            retry(lambda: _migrate(connection, migrations, latest, path, what), "migrating it")
    except BaseException:
        connection.close()
        raise
    return connection


@dataclass(frozen=True)
class _Retry:
    path: Path
    what: str
    deadline: float
    deadline_s: float
    clock: Callable[[], float]
    pause: Callable[[float], None]

    def __call__(self, step: Callable[[], T], doing: str) -> T:
        wait = _FIRST_PAUSE_S
        while True:
            try:
                return step()
            except (sqlite3.OperationalError, _JournalModeKeptError) as error:
                if isinstance(error, sqlite3.OperationalError) and not _busy(error):
                    raise
                if self.clock() >= self.deadline:
                    raise StoreBusyError(
                        f"{self.what} {self.path} stayed locked by other processes for "
                        f"{self.deadline_s:g} s while {doing}: {error}",
                        fix="stop other programs that hold the file open (another codemode "
                        "with the same state_dir?) and start again",
                    ) from None
            self.pause(wait)
            wait = min(wait * 2, _LONGEST_PAUSE_S)


class _JournalModeKeptError(Exception):
    """SQLite kept the old journal mode without an error: another connection was in the way."""


def _busy(error: sqlite3.OperationalError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _BUSY_CODES
    return "locked" in str(error) or "busy" in str(error)


def _journal_mode(connection: sqlite3.Connection) -> str:
    return str(connection.execute("PRAGMA journal_mode").fetchone()[0]).lower()


def _make_wal(connection: sqlite3.Connection) -> None:
    mode = str(connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
    if mode != "wal":  # SQLite answers with the old mode when another process is in the way
        raise _JournalModeKeptError(f"the journal mode stayed {mode}")


def _version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


def _migrate(
    connection: sqlite3.Connection,
    migrations: Sequence[Migration],
    latest: int,
    path: Path,
    what: str,
) -> None:
    connection.execute("BEGIN IMMEDIATE")
    try:
        found = _version(connection)  # another process may have migrated meanwhile
        if found > latest:
            raise _downgrade(connection, found, latest, path, what)
        connection.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (version INTEGER PRIMARY KEY, "
            "name TEXT NOT NULL, codemode TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        for migration in migrations[found:]:
            if callable(migration.apply):
                migration.apply(connection)
            else:
                for statement in migration.apply:
                    connection.execute(statement)
            connection.execute(
                f"INSERT OR REPLACE INTO {SCHEMA_TABLE} VALUES (?, ?, ?, ?)",  # noqa: S608
                (migration.version, migration.name, _codemode_version(), time.time()),
            )
        connection.execute(f"PRAGMA user_version = {latest}")
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
        raise


def _downgrade(
    connection: sqlite3.Connection, found: int, latest: int, path: Path, what: str
) -> StoreVersionError:
    writer = "a newer codemode"
    with contextlib.suppress(sqlite3.Error):
        row = connection.execute(
            f"SELECT codemode, name FROM {SCHEMA_TABLE} WHERE version = ?",  # noqa: S608
            (found,),
        ).fetchone()
        if row is not None:
            writer = f"codemode {row[0]} (its step {found}, {row[1]!r})"
    return StoreVersionError(
        f"{what} {path} has schema version {found}, written by {writer}; this codemode "
        f"({_codemode_version()}) knows versions up to {latest} and will not open it, so as "
        "not to damage it",
        fix="run that codemode version or a newer one, or move the file aside to start "
        f"{what} afresh (the old file stays readable by the newer codemode)",
    )


@functools.cache
def _codemode_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("codemode")
    except PackageNotFoundError:
        return "unknown"

"""``open_database``: migrations run once and in order, a newer file is refused with a clear
error, a lock held by another process is waited out (until a deadline), and processes that
open a new file at the same moment all get it migrated exactly once."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.errors import StateStoreError, StoreBusyError, StoreVersionError
from codemode.storage.sqlite import SCHEMA_TABLE, Migration, latest_version, open_database

SRC = Path(__file__).resolve().parents[2] / "src"

NOTES = Migration(1, "notes", ("CREATE TABLE IF NOT EXISTS notes (text TEXT NOT NULL)",))


def add_stars(connection: sqlite3.Connection) -> None:
    connection.execute("ALTER TABLE notes ADD COLUMN stars INTEGER NOT NULL DEFAULT 0")
    connection.execute("UPDATE notes SET stars = length(text)")


STARS = Migration(2, "stars", add_stars)


class FakeClock:
    """Time that moves only when the code under test pauses."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def __call__(self) -> float:
        return self.now

    def pause(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "notes.sqlite"


def test_a_new_file_is_private_in_wal_and_has_every_step(path: Path) -> None:
    db = open_database(path, [NOTES, STARS], what="the notes")
    db.execute("INSERT INTO notes (text) VALUES ('hi')")
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    steps = db.execute(f"SELECT version, name FROM {SCHEMA_TABLE} ORDER BY version").fetchall()
    assert steps == [(1, "notes"), (2, "stars")]
    db.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_an_older_file_gets_only_the_steps_it_lacks_and_keeps_its_rows(path: Path) -> None:
    db = open_database(path, [NOTES], what="the notes")
    db.execute("INSERT INTO notes (text) VALUES ('four')")
    db.close()
    runs: list[int] = []

    def counted(connection: sqlite3.Connection) -> None:
        runs.append(1)
        add_stars(connection)

    for _ in range(2):  # the second open finds nothing to do
        db = open_database(path, [NOTES, Migration(2, "stars", counted)], what="the notes")
        assert db.execute("SELECT text, stars FROM notes").fetchall() == [("four", 4)]
        db.close()
    assert runs == [1]


def test_a_file_made_before_migrations_existed_is_taken_over(path: Path) -> None:
    path.parent.mkdir()
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE notes (text TEXT NOT NULL)")
    old.execute("INSERT INTO notes VALUES ('kept')")
    old.commit()
    old.close()
    db = open_database(path, [NOTES, STARS], what="the notes")
    assert db.execute("SELECT text, stars FROM notes").fetchall() == [("kept", 4)]
    db.close()


def test_a_failing_step_leaves_the_file_as_it_was(path: Path) -> None:
    open_database(path, [NOTES], what="the notes").close()

    def broken(connection: sqlite3.Connection) -> None:
        connection.execute("CREATE TABLE half (x)")
        raise sqlite3.IntegrityError("the step failed")

    with pytest.raises(sqlite3.IntegrityError):
        open_database(path, [NOTES, Migration(2, "broken", broken)], what="the notes")
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert db.execute("SELECT name FROM sqlite_master WHERE name = 'half'").fetchall() == []
    db.close()


def test_a_file_from_a_newer_codemode_is_refused_naming_its_writer(path: Path) -> None:
    db = open_database(path, [NOTES, STARS], what="the notes")
    db.execute(f"UPDATE {SCHEMA_TABLE} SET codemode = '9.9.9' WHERE version = 2")
    db.close()
    with pytest.raises(StoreVersionError) as refused:
        open_database(path, [NOTES], what="the notes")
    assert isinstance(refused.value, StateStoreError)
    assert "schema version 2, written by codemode 9.9.9 (its step 2, 'stars')" in str(refused.value)
    assert "knows versions up to 1" in refused.value.message
    assert refused.value.fix is not None and "move the file aside" in refused.value.fix
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2  # untouched
    db.close()


def test_a_newer_file_without_a_record_of_its_writer_is_refused_too(path: Path) -> None:
    path.parent.mkdir()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 7")
    db.close()
    with pytest.raises(StoreVersionError, match="version 7, written by a newer codemode"):
        open_database(path, [NOTES], what="the notes")


def test_versions_must_count_up_from_one() -> None:
    assert latest_version([NOTES, STARS]) == 2
    with pytest.raises(ValueError, match="1, 2, 3"):
        latest_version([STARS])


@pytest.fixture
def reader(path: Path) -> Iterator[sqlite3.Connection]:
    """Another process's open read transaction on a new file (journal mode DELETE): switching
    to WAL needs it gone."""
    path.parent.mkdir()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("CREATE TABLE notes (text TEXT NOT NULL)")
    other.execute("BEGIN")
    other.execute("SELECT * FROM notes").fetchall()
    yield other
    other.close()


def test_a_lock_held_by_another_connection_is_waited_out(
    path: Path, reader: sqlite3.Connection
) -> None:
    clock = FakeClock()

    def pause(seconds: float) -> None:
        clock.pause(seconds)
        if len(clock.pauses) == 3:
            reader.execute("COMMIT")

    db = open_database(path, [NOTES], what="the notes", busy_timeout_s=0, clock=clock, pause=pause)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert len(clock.pauses) == 3
    db.close()


def test_a_lock_held_past_the_deadline_is_a_clear_error(
    path: Path, reader: sqlite3.Connection
) -> None:
    clock = FakeClock()
    with pytest.raises(StoreBusyError) as busy:
        open_database(
            path,
            [NOTES],
            what="the notes",
            busy_timeout_s=0,
            deadline_s=2,
            clock=clock,
            pause=clock.pause,
        )
    assert f"the notes {path} stayed locked by other processes for 2 s" in busy.value.message
    assert busy.value.fix is not None and "same state_dir" in busy.value.fix
    assert 2 <= clock.now < 2.1  # waited until the deadline, not beyond


RACER = """
import sys
from pathlib import Path
from codemode.storage.sqlite import Migration, open_database

def first(connection):
    connection.execute("CREATE TABLE runs (pid INTEGER)")
    connection.execute("INSERT INTO runs VALUES (?)", (__import__("os").getpid(),))

print("ready", flush=True)
sys.stdin.readline()  # every racer starts at once
db = open_database(Path(sys.argv[1]), [Migration(1, "runs", first)], what="the race")
db.execute("CREATE TABLE IF NOT EXISTS hits (n INTEGER)")
db.execute("INSERT INTO hits VALUES (1)")
db.close()
"""


def race(path: Path, program: str, count: int) -> list[int]:
    """Start ``count`` processes running ``program`` on ``path``; once each has said it is
    ready, let them all go at once. Their exit codes."""
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", program, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(SRC)},
            text=True,
        )
        for _ in range(count)
    ]
    for racer in racers:
        assert racer.stdout is not None and racer.stdout.readline() == "ready\n"
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.close()
    codes = [racer.wait(timeout=60) for racer in racers]
    for racer in racers:
        assert racer.stdout is not None
        racer.stdout.close()
    return codes


@pytest.mark.parametrize("round_", range(3))  # each round has a fresh file to race for
def test_processes_racing_to_create_a_file_all_open_it_and_migrate_it_once(
    path: Path, round_: int
) -> None:
    assert race(path, RACER, 8) == [0] * 8
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    assert db.execute("SELECT count(*) FROM hits").fetchone()[0] == 8
    db.close()


def test_the_rollback_journal_is_kept_when_asked(path: Path) -> None:
    db = open_database(path, [NOTES], what="the notes", wal=False)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db.close()


def test_a_symlink_in_place_of_the_file_is_refused(path: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.sqlite"
    path.parent.mkdir()
    path.symlink_to(elsewhere)
    with pytest.raises(OSError):
        open_database(path, [NOTES], what="the notes")
    assert not elsewhere.exists()

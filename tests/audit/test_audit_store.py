"""SQLiteAuditLog and its in-memory twin: queries, append-only, concurrency, corrupt files."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.audit import AuditEvent, AuditFilter, AuditLog, MemoryAuditLog, SQLiteAuditLog


def event(i: int, **changes: object) -> AuditEvent:
    values: dict[str, object] = {
        "time": 1000.0 + i,
        "session": f"s{i % 3}",
        "server": ("crm", "mail")[i % 2],
        "tool": ("search_contacts", "send_email", "delete_contact")[i % 3],
        "args_digest": f"sha256:{i:064x}",
        "decision": ("allow", "deny", "ask-approved", "ask-denied", "budget")[i % 5],
        "duration_ms": float(i),
        "outcome": ("ok", "error", "denied")[i % 3],
        "error_code": None if i % 3 == 0 else "tool_error",
        "message": "" if i % 3 == 0 else f"message {i}",
        "rule": None if i % 2 else "policy.rules[0]",
    }
    values.update(changes)
    return AuditEvent(**values)  # type: ignore[arg-type]


@pytest.fixture
def sqlite_log(tmp_path: Path) -> Iterator[SQLiteAuditLog]:
    log = SQLiteAuditLog(tmp_path / "state" / "audit.sqlite")
    yield log
    log.close()


FILTERS = [
    AuditFilter(),
    AuditFilter(limit=None),
    AuditFilter(limit=5),
    AuditFilter(session="s1"),
    AuditFilter(tool="crm.*"),
    AuditFilter(tool="*.send_?mail"),
    AuditFilter(tool="mail.[!s]*"),
    AuditFilter(since=1010.0, until=1020.0),
    AuditFilter(decision="deny", limit=3),
    AuditFilter(outcome="denied", session="s2"),
    AuditFilter(session="nobody"),
]


@pytest.mark.parametrize("filters", FILTERS)
def test_sqlite_and_memory_answer_alike(sqlite_log: SQLiteAuditLog, filters: AuditFilter) -> None:
    memory = MemoryAuditLog()
    logs: list[AuditLog] = [sqlite_log, memory]
    for i in range(40):
        for log in logs:
            log.append(event(i))
    expected = [event(i) for i in range(40) if _matches(i, filters)]
    if filters.limit is not None:
        expected = expected[-filters.limit :]
    assert memory.query(filters) == expected
    assert sqlite_log.query(filters) == expected


def _matches(i: int, filters: AuditFilter) -> bool:
    from codemode.audit import event_matches

    return event_matches(event(i), filters)


def test_events_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    with SQLiteAuditLog(path) as log:
        log.append(event(1))
    with SQLiteAuditLog(path) as log:
        log.append(event(2))
        assert log.query() == [event(1), event(2)]
    assert path.stat().st_mode & 0o777 == 0o600


def test_the_table_is_append_only(sqlite_log: SQLiteAuditLog) -> None:
    sqlite_log.append(event(1))
    raw = sqlite3.connect(sqlite_log.path)
    try:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            raw.execute("UPDATE events SET outcome = 'ok'")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            raw.execute("DELETE FROM events")
    finally:
        raw.close()
    assert sqlite_log.query() == [event(1)]


def test_journal_is_wal(sqlite_log: SQLiteAuditLog) -> None:
    raw = sqlite3.connect(sqlite_log.path)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        raw.close()


def test_concurrent_appends_from_threads(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    shared = SQLiteAuditLog(path)
    other = SQLiteAuditLog(path)  # a second connection to the same file
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        log = other if index % 2 else shared
        try:
            start.wait(timeout=10)
            for i in range(100):
                log.append(event(i, session=f"t{index}"))
        except BaseException as error:  # noqa: BLE001 - reported by the assert below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    everything = shared.query(AuditFilter(limit=None))
    assert len(everything) == 800
    for n in range(8):
        assert len(shared.query(AuditFilter(session=f"t{n}", limit=None))) == 100
    shared.close()
    other.close()


WRITER = """
import sys
from codemode.audit import AuditEvent, SQLiteAuditLog
print("ready", flush=True)
sys.stdin.readline()  # every writer starts at once
log = SQLiteAuditLog(sys.argv[1])
for i in range(int(sys.argv[3])):
    log.append(AuditEvent(float(i), sys.argv[2], "crm", "t", "sha256:0", "allow", 0.0, "ok"))
log.close()
"""


def test_concurrent_appends_from_processes(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    # The writers race to create the file and its schema, too: each says when it is ready,
    # then all are let go at once.
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), f"p{n}", "100"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(8)
    ]
    for writer in writers:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.close()
    for writer in writers:
        assert writer.wait(timeout=60) == 0
        assert writer.stdout is not None
        writer.stdout.close()
    with SQLiteAuditLog(path) as log:
        assert len(log.query(AuditFilter(limit=None))) == 800
        for n in range(8):
            assert len(log.query(AuditFilter(session=f"p{n}", limit=None))) == 100


def test_a_garbage_file_is_moved_aside_and_a_new_log_started(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    garbage = b"this is not a database at all\x00" * 200
    path.write_bytes(garbage)
    with SQLiteAuditLog(path) as log:
        log.append(event(1))
        assert log.query() == [event(1)]
        assert len(log.recovered) == 1
        kept = log.recovered[0]
    assert kept.name.startswith("audit.sqlite.corrupt-")
    assert kept.read_bytes() == garbage


def test_a_damaged_database_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    with SQLiteAuditLog(path) as log:
        for i in range(200):
            log.append(event(i, message="x" * 200))
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw.close()
    data = bytearray(path.read_bytes())
    assert len(data) > 8192
    data[100:] = b"\xff" * (len(data) - 100)  # keep the header, wreck every page
    path.write_bytes(bytes(data))
    with SQLiteAuditLog(path) as log:
        assert log.query() == []  # a fresh log
        log.append(event(7))
        assert log.query() == [event(7)]
        assert len(log.recovered) == 1


def test_a_log_replaced_by_another_process_is_followed(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    first = SQLiteAuditLog(path)
    first.append(event(1))
    # Another process found the file corrupt, moved it aside and started a new one.
    path.rename(tmp_path / "audit.sqlite.corrupt-x")
    for suffix in ("-wal", "-shm"):
        side = tmp_path / f"audit.sqlite{suffix}"
        if side.exists():
            side.rename(tmp_path / f"audit.sqlite.corrupt-x{suffix}")
    second = SQLiteAuditLog(path)
    second.append(event(2))
    first.append(event(3))
    assert second.query() == [event(2), event(3)]
    assert first.recovered == []  # it did not move the fresh file aside
    first.close()
    second.close()

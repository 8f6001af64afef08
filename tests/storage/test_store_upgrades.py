"""Files written before the stores opened through ``open_database`` open with the new code,
keep every row and end at the newest schema: each test writes a file the way the older code
did (its own CREATE statements and ``user_version``), then opens it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from codemode.audit.events import AuditEvent, AuditFilter
from codemode.audit.sqlite import MIGRATIONS as AUDIT_MIGRATIONS
from codemode.audit.sqlite import SQLiteAuditLog
from codemode.catalog.cache import MIGRATIONS as CACHE_MIGRATIONS
from codemode.catalog.cache import SQLiteDefinitionCache, spec_to_json
from codemode.state.sqlite import MIGRATIONS as STATE_MIGRATIONS
from codemode.state.sqlite import SQLiteStore
from codemode.tools import ToolSpec

SPEC = ToolSpec(server="crm", name="get_lead", description="A lead.", input_schema={})

AUDIT_V1 = """
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL, session TEXT NOT NULL, server TEXT NOT NULL, tool TEXT NOT NULL,
    args_digest TEXT NOT NULL, decision TEXT NOT NULL, duration_ms REAL NOT NULL,
    outcome TEXT NOT NULL, error_code TEXT, message TEXT NOT NULL, rule TEXT
);
CREATE INDEX events_time ON events (time);
CREATE INDEX events_session ON events (session, id);
CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
PRAGMA journal_mode = WAL;
PRAGMA user_version = 1;
"""


def old_file(path: Path, script: str) -> None:
    db = sqlite3.connect(path)
    db.executescript(script)
    db.close()


def test_an_audit_log_of_schema_1_gains_its_count_column(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    old_file(path, AUDIT_V1)
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO events (time, session, server, tool, args_digest, decision, duration_ms, "
        "outcome, message) VALUES (1.0, 's1', 'crm', 'get', 'sha256:0', 'allow', 2.0, 'ok', '')"
    )
    db.commit()
    db.close()
    with SQLiteAuditLog(path) as log:
        log.append(AuditEvent(2.0, "s1", "crm", "get", "sha256:1", "allow", 1.0, "ok", count=3))
        events = log.query(AuditFilter(limit=None))
    assert [(event.time, event.count) for event in events] == [(1.0, 1), (2.0, 3)]
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(AUDIT_MIGRATIONS)
    db.close()


def test_an_audit_log_of_schema_2_opens_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    old_file(
        path,
        AUDIT_V1.replace("rule TEXT\n", "rule TEXT, count INTEGER NOT NULL DEFAULT 1\n").replace(
            "user_version = 1", "user_version = 2"
        ),
    )
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO events (time, session, server, tool, args_digest, decision, duration_ms, "
        "outcome, message, count) VALUES (1.0, 's', 'crm', 'get', 'x', 'deny', 0, 'denied', "
        "'no', 5)"
    )
    db.commit()
    db.close()
    with SQLiteAuditLog(path) as log:
        [event] = log.query()
    assert (event.decision, event.count) == ("deny", 5)


def test_a_state_database_from_before_migrations_keeps_its_values(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    old_file(
        path,
        """
        CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, data BLOB NOT NULL, expires_at REAL);
        CREATE INDEX IF NOT EXISTS kv_expiry ON kv (expires_at) WHERE expires_at IS NOT NULL;
        INSERT INTO kv VALUES ('o:alice:notes', X'7b7d', NULL);
        PRAGMA journal_mode = WAL;
        """,
    )
    store = SQLiteStore(path)
    found = store.get("o:alice:notes")
    assert found is not None and found.data == b"{}"
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(STATE_MIGRATIONS)
    db.close()


def cache_file(path: Path, version: int) -> None:
    old_file(
        path,
        f"""
        CREATE TABLE definitions (server TEXT PRIMARY KEY, fingerprint TEXT NOT NULL,
            specs TEXT NOT NULL, updated_at REAL NOT NULL);
        INSERT INTO definitions VALUES ('crm', 'f1', '{json.dumps([spec_to_json(SPEC)])}', 1.0);
        PRAGMA user_version = {version};
        """,
    )


def test_a_definition_cache_of_schema_3_keeps_its_tools(tmp_path: Path) -> None:
    path = tmp_path / "definitions.sqlite"
    cache_file(path, 3)
    cache = SQLiteDefinitionCache(path)
    assert cache.get("crm", "f1") == [SPEC]
    cache.close()


def test_a_definition_cache_of_an_older_tool_shape_is_listed_again(tmp_path: Path) -> None:
    path = tmp_path / "definitions.sqlite"
    cache_file(path, 2)
    cache = SQLiteDefinitionCache(path)
    assert cache.get("crm", "f1") is None
    cache.close()


def test_a_newer_codemodes_definition_cache_is_set_aside_untouched(tmp_path: Path) -> None:
    path = tmp_path / "definitions.sqlite"
    cache_file(path, len(CACHE_MIGRATIONS) + 1)
    before = path.read_bytes()
    cache = SQLiteDefinitionCache(path)
    assert cache.get("crm", "f1") is None
    cache.close()
    [aside] = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name and p.suffix != "-wal"]
    assert aside.read_bytes() == before

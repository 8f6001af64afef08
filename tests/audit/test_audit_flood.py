"""The audit log misses nothing (grant refusals, late frames) and cannot be flooded (repeats
aggregated, a per-session budget, rotation and retention of the file)."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from codemode.audit import AuditFilter, AuditInvoker, MemoryAuditLog, SQLiteAuditLog
from codemode.audit.events import AuditEvent
from codemode.audit.rotation import rotated_files
from codemode.bridge.host import BridgeHost, ToolAccess
from codemode.errors import ConfigError
from codemode.policy import Budget, BudgetExhaustedError, Policy, PolicyInvoker, PolicySettings
from codemode.settings.audit import AuditSettings
from codemode.testing import RecordingInvoker
from codemode.tools import ToolCall


def ok_tools() -> RecordingInvoker:
    return RecordingInvoker(default={"ok": True})


def frame(request_id: int, tool: str = "search", execution: int = 1) -> dict[str, Any]:
    return {"op": "call", "id": request_id, "exec": execution, "server": "crm", "tool": tool,
            "args": {"q": "x"}}  # fmt: skip


def audited(log: MemoryAuditLog, inner: Any = None, **settings: Any) -> AuditInvoker:
    return AuditInvoker(
        inner or ok_tools(), log, "s1", settings=AuditSettings(**settings), clock=lambda: 1000.0
    )


def test_a_call_refused_at_the_grant_check_is_audited() -> None:
    log = MemoryAuditLog()
    audit = audited(log)
    access = ToolAccess(audit, grant=lambda s, t: t == "search", on_refused=audit.record_refused)
    host = BridgeHost(1, access, deadline=time.monotonic() + 30)
    assert host.handle(frame(1, "search"))["ok"] is True
    reply = host.handle(frame(2, "export_all"))
    assert reply["error"]["code"] == "tool_not_granted"
    rows = log.query()
    assert [(r.tool, r.outcome, r.error_code, r.rule) for r in rows] == [
        ("search", "ok", None, None),
        ("export_all", "denied", "tool_not_granted", "bridge.tool_not_granted"),
    ]


def test_a_late_frame_is_audited() -> None:
    log = MemoryAuditLog()
    audit = audited(log)
    tools = ok_tools()
    access = ToolAccess(audit, on_refused=audit.record_refused)
    host = BridgeHost(1, access, deadline=time.monotonic() + 30)
    host.close()
    assert host.handle(frame(1))["error"]["code"] == "late_frame"
    assert host.handle(frame(2, execution=7))["error"]["code"] == "late_frame"
    assert tools.calls == []
    rows = log.query()
    assert [(r.tool, r.error_code) for r in rows] == [("search", "late_frame")]
    audit.flush()
    assert log.query()[-1].count == 1  # the second late frame, counted


def test_identical_denials_become_one_counted_row() -> None:
    log = MemoryAuditLog()
    deny = PolicySettings.from_mapping({"rules": [{"tools": ["crm.*"], "action": "deny"}]}, "t")
    policy = PolicyInvoker(
        ok_tools(), Policy(deny, lambda s, t: None), approver=None, budget=Budget()
    )
    audit = audited(log, policy)
    for index in range(2000):
        with pytest.raises(Exception, match="denied by policy"):
            audit.invoke(ToolCall("crm", "delete", {"id": index}), timeout_s=5)
    assert len(log.query()) == 1  # the first one, written at once
    audit.flush()
    rows = log.query()
    assert [(r.decision, r.count) for r in rows] == [("deny", 1), ("deny", 1999)]
    assert "repeated 1999 times" in rows[1].message


def test_repeats_are_written_once_per_window() -> None:
    log = MemoryAuditLog()
    now = [0.0]
    audit = AuditInvoker(
        ok_tools(), log, "s1", settings=AuditSettings(repeat_window_s=60), clock=lambda: now[0]
    )
    for second in range(0, 300, 3):  # a refusal every 3 s for 5 minutes
        now[0] = float(second)
        audit.record_refused(ToolCall("crm", "x", {}), "tool_not_granted", "not granted")
    rows = log.query()
    assert 4 <= len(rows) <= 6
    audit.flush()
    assert sum(row.count for row in log.query()) == 100


def test_many_kinds_of_refusal_share_rows_past_a_bound() -> None:
    log = MemoryAuditLog()
    audit = audited(log)
    for index in range(1000):
        audit.record_refused(ToolCall("crm", f"tool_{index}", {}), "tool_not_granted", "no")
    audit.flush()
    rows = log.query(AuditFilter(limit=None))
    assert len(rows) <= 70
    assert sum(row.count for row in rows) == 1000


def test_a_session_past_its_write_budget_is_refused_and_counted() -> None:
    log = MemoryAuditLog()
    tools = ok_tools()
    audit = audited(log, tools, events_per_session=5)
    for index in range(12):
        if index < 5:
            audit.invoke(ToolCall("crm", "get", {"id": index}), timeout_s=5)
        else:
            with pytest.raises(BudgetExhaustedError, match="audit budget"):
                audit.invoke(ToolCall("crm", "get", {"id": index}), timeout_s=5)
    assert len(tools.calls) == 5  # nothing ran unaudited
    assert len(log.query()) == 5
    audit.flush()
    rows = log.query()
    assert rows[-1].error_code == "audit_budget" and rows[-1].count == 7
    assert len(rows) == 6


def event(moment: float, message: str = "") -> AuditEvent:
    return AuditEvent(moment, "s1", "crm", "get", "sha256:00", "allow", 1.0, "ok", None, message)


def test_the_file_rotates_by_size_and_keeps_few_files(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    settings = AuditSettings(max_bytes=64 * 1024, keep_files=2)
    store = SQLiteAuditLog(path, rotation=settings)
    for index in range(6000):
        store.append(event(time.time(), "x" * 100 + str(index)))
    assert len(store.rotated) >= 3
    assert len(rotated_files(path)) == 2
    assert path.stat().st_size < 3 * settings.max_bytes
    assert store.query(AuditFilter(limit=1))[0].message.endswith("5999")
    store.close()


def test_the_file_rotates_by_age_and_old_files_are_deleted(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    now = [time.time()]
    settings = AuditSettings(rotate_after_days=1, retention_days=30)
    with SQLiteAuditLog(path) as old:
        old.append(event(now[0] - 3 * 86400))
    store = SQLiteAuditLog(path, rotation=settings, clock=lambda: now[0])
    assert len(store.rotated) == 1  # its oldest row was 3 days old
    assert store.query() == []
    os.utime(store.rotated[0], (now[0] - 40 * 86400, now[0] - 40 * 86400))
    store.close()
    SQLiteAuditLog(path, rotation=settings, clock=lambda: now[0]).close()
    assert rotated_files(path) == []


def test_a_version_1_log_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    connection = sqlite3.connect(path)
    connection.executescript(
        "CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, "
        "session TEXT NOT NULL, server TEXT NOT NULL, tool TEXT NOT NULL, args_digest TEXT NOT "
        "NULL, decision TEXT NOT NULL, duration_ms REAL NOT NULL, outcome TEXT NOT NULL, "
        "error_code TEXT, message TEXT NOT NULL, rule TEXT);"
        "INSERT INTO events (time, session, server, tool, args_digest, decision, duration_ms, "
        "outcome, message) VALUES (1.0, 's0', 'crm', 'old', 'sha256:00', 'allow', 1, 'ok', '');"
        "PRAGMA user_version = 1;"
    )
    connection.close()
    with SQLiteAuditLog(path) as store:
        store.append(event(2.0))
        rows = store.query()
    assert [(row.tool, row.count) for row in rows] == [("old", 1), ("get", 1)]


def test_audit_settings_are_checked() -> None:
    assert AuditSettings.from_mapping({"max_bytes": 1024}).max_bytes == 1024
    with pytest.raises(ConfigError, match=r"audit\.keep_files"):
        AuditSettings.from_mapping({"keep_files": 1.5})
    with pytest.raises(ConfigError, match=r"audit\.size"):
        AuditSettings.from_mapping({"size": 3})

"""AuditInvoker outside PolicyInvoker: every call is logged, denials included, with no PII."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from codemode.audit import AuditFilter, AuditInvoker, MemoryAuditLog, SQLiteAuditLog
from codemode.audit.events import AuditEvent, argument_digest
from codemode.errors import ToolError
from codemode.policy import (
    ApprovalDeniedError,
    Budget,
    BudgetExhaustedError,
    Policy,
    PolicyDeniedError,
    PolicyInvoker,
    PolicySettings,
)
from codemode.testing import RecordingInvoker
from codemode.tools import ToolCall

EMAIL = "jane.doe@example.com"
PHONE = "+44 20 7946 0958"


def _fail(call: ToolCall) -> Any:
    raise ToolError(f"crm.fail: no contact {EMAIL} with phone {PHONE}")


def _crash(call: ToolCall) -> Any:
    raise RuntimeError(f"bug involving {EMAIL}")


def FakeTools() -> RecordingInvoker:
    return RecordingInvoker({"fail": _fail, "crash": _crash}, default={"email": EMAIL})


class Approver:
    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers

    def request(self, call: ToolCall, *, reason: str) -> bool:
        return self.answers.pop(0)


def chain(log: Any, approver: Approver | None = None) -> tuple[AuditInvoker, FakeTools]:
    tools = FakeTools()
    settings = PolicySettings.from_mapping(
        {
            "rules": [
                {"tools": ["crm.delete_*"], "action": "deny"},
                {"tools": ["mail.*"], "action": "ask"},
            ],
            "budget": {"per_tool": {"crm.limited": 1}},
        },
        "test",
    )
    policy = PolicyInvoker(
        tools,
        Policy(settings),
        approver=approver,
        budget=Budget(settings.budget),
    )
    return AuditInvoker(policy, log, "session-1"), tools


def run(invoker: AuditInvoker, call: ToolCall) -> str:
    try:
        invoker.invoke(call, timeout_s=5)
    except ToolError as error:
        return type(error).__name__
    except RuntimeError:
        return "RuntimeError"
    return "ok"


def test_every_call_is_logged_with_its_decision_and_outcome() -> None:
    log = MemoryAuditLog()
    invoker, tools = chain(log, Approver([True, False]))
    args = {"to": EMAIL, "phone": PHONE}
    results = [
        run(invoker, ToolCall("crm", "search", args)),
        run(invoker, ToolCall("crm", "delete_contact", args)),
        run(invoker, ToolCall("mail", "send", args)),
        run(invoker, ToolCall("mail", "send", args)),
        run(invoker, ToolCall("crm", "limited", {})),
        run(invoker, ToolCall("crm", "limited", {})),
        run(invoker, ToolCall("crm", "fail", {})),
        run(invoker, ToolCall("crm", "crash", {})),
    ]
    assert results == [
        "ok",
        PolicyDeniedError.__name__,
        "ok",
        ApprovalDeniedError.__name__,
        "ok",
        BudgetExhaustedError.__name__,
        "ToolError",
        "RuntimeError",
    ]
    events = log.query(AuditFilter(limit=None))
    summary = [(e.tool, e.decision, e.outcome, e.error_code) for e in events]
    assert summary == [
        ("search", "allow", "ok", None),
        ("delete_contact", "deny", "denied", "policy_denied"),
        ("send", "ask-approved", "ok", None),
        ("send", "ask-denied", "denied", "approval_denied"),
        ("limited", "allow", "ok", None),
        ("limited", "budget", "denied", "budget_exhausted"),
        ("fail", "allow", "error", "tool_error"),
        ("crash", "allow", "error", "internal_error"),
    ]
    assert events[1].rule == "policy.rules[0]"
    assert events[2].rule == "policy.rules[1]"
    assert all(e.session == "session-1" and e.duration_ms >= 0 for e in events)
    # Only the allowed and approved calls reached the tools.
    assert [c.tool for c in tools.calls] == ["search", "send", "limited", "fail", "crash"]


def test_the_log_holds_a_digest_not_the_arguments() -> None:
    log = MemoryAuditLog()
    invoker, _ = chain(log)
    args = {"to": EMAIL, "phone": PHONE, "n": 1}
    invoker.invoke(ToolCall("crm", "search", args), timeout_s=5)
    (recorded,) = log.query()
    assert recorded.args_digest == argument_digest(args)
    assert EMAIL not in repr(recorded)


def test_keyed_digest() -> None:
    log = MemoryAuditLog()
    invoker = AuditInvoker(FakeTools(), log, "s", digest_key=b"secret")
    invoker.invoke(ToolCall("crm", "search", {"a": 1}), timeout_s=5)
    assert log.query()[0].args_digest == argument_digest({"a": 1}, key=b"secret")


def test_no_pii_anywhere_in_the_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    with SQLiteAuditLog(path) as log:
        invoker, _ = chain(log, Approver([False]))
        args = {"to": EMAIL, "phone": PHONE}
        for call in (
            ToolCall("crm", "search", args),
            ToolCall("crm", "delete_contact", args),
            ToolCall("mail", "send", args),
            ToolCall("crm", "fail", args),
            ToolCall("crm", "crash", args),
        ):
            run(invoker, call)
        assert len(log.query()) == 5
        assert "<EMAIL>" in log.query(AuditFilter(tool="crm.fail"))[0].message
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    dump = "\n".join(raw.iterdump())
    raw.close()
    blobs = [dump] + [p.read_bytes().decode("latin-1") for p in tmp_path.iterdir() if p.is_file()]
    for blob in blobs:
        assert EMAIL not in blob
        assert "jane.doe" not in blob
        assert not re.search(r"7946\D?0958", blob)


class BrokenLog:
    def append(self, event: AuditEvent) -> None:
        raise OSError("disk full")

    def query(self, filters: AuditFilter | None = None) -> list[AuditEvent]:
        return []


def test_a_failing_log_never_breaks_a_call(caplog: pytest.LogCaptureFixture) -> None:
    invoker = AuditInvoker(FakeTools(), BrokenLog(), "s")
    assert invoker.invoke(ToolCall("crm", "search", {}), timeout_s=5) == {"email": EMAIL}
    assert invoker.failed_writes == 1
    assert "could not write the audit event" in caplog.text


def test_without_policy_every_call_is_allow() -> None:
    log = MemoryAuditLog()
    invoker = AuditInvoker(FakeTools(), log, "s")
    invoker.invoke(ToolCall("crm", "search", {}), timeout_s=5)
    assert log.query()[0].decision == "allow"

"""The public names of codemode.policy and codemode.audit, pinned."""

from __future__ import annotations

import codemode.audit
import codemode.policy


def test_policy_exports() -> None:
    assert sorted(codemode.policy.__all__) == sorted(
        [
            "Action",
            "ApprovalDeniedError",
            "Budget",
            "BudgetExceededError",
            "BudgetExhaustedError",
            "BudgetSettings",
            "Decision",
            "Mode",
            "Policy",
            "PolicyDeniedError",
            "PolicyInvoker",
            "PolicyRefusedError",
            "PolicySettings",
            "Rule",
            "SpecLookup",
            "Verdict",
            "VerdictSlot",
            "matches_any",
            "note_verdict",
            "verdict_scope",
        ]
    )
    for name in codemode.policy.__all__:
        assert hasattr(codemode.policy, name)


def test_audit_exports() -> None:
    assert sorted(codemode.audit.__all__) == sorted(
        [
            "DECISIONS",
            "OUTCOMES",
            "AuditEvent",
            "AuditFilter",
            "AuditInvoker",
            "AuditLog",
            "MemoryAuditLog",
            "Outcome",
            "SQLiteAuditLog",
            "argument_digest",
            "event_matches",
            "format_time",
            "scrub",
        ]
    )
    for name in codemode.audit.__all__:
        assert hasattr(codemode.audit, name)

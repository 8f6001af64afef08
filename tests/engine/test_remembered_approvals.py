"""Remembered approvals through the engine: audited in the audit log, shown in the session's
results, kept per session and per owner."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from codemode.audit import AuditFilter, MemoryAuditLog
from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.errors import UsageError
from codemode.policy import PolicySettings
from codemode.sandbox import SandboxSettings

pytestmark = pytest.mark.anyio

THREE = (
    "from servers import desk\n"
    "for n in range(3):\n"
    "    desk.close_ticket(ticket=f'T-{n}')\n"
    "print('closed')\n"
)


@pytest.fixture
async def engine() -> AsyncIterator[tuple[Codemode, MemoryAuditLog, list[str]]]:
    closed: list[str] = []

    def close_ticket(ticket: str) -> bool:
        """Close a support ticket."""
        closed.append(ticket)
        return True

    policy = PolicySettings.from_mapping({"rules": [{"tools": ["desk.*"], "action": "ask"}]}, "t")
    config = CodemodeConfig(servers={}, sandbox=SandboxSettings(pool_size=1), policy=policy)
    log = MemoryAuditLog()
    catalog = Catalog([PythonConnector("desk", [close_ticket])])
    async with Codemode(config, catalog=catalog, semantic=False, audit_log=log) as started:
        yield started, log, closed


async def approve_all(engine: Codemode, result: Any, remember: str, owner: str | None) -> Any:
    asked = 0
    while result.status == "approval_required":
        asked += 1
        result = await engine.approve(result.approval.id, True, remember=remember, owner=owner)
    return result, asked


async def test_a_tool_grant_is_audited_and_shown_in_the_sessions_results(engine):
    codemode, log, closed = engine
    result, asked = await approve_all(codemode, await codemode.execute(THREE), "tool", None)
    assert (result.status, asked, closed) == ("ok", 1, ["T-0", "T-1", "T-2"])
    assert [(g["scope"], g["target"]) for g in result.grants] == [("tool", "desk.close_ticket")]
    events = log.query(AuditFilter(tool="desk.close_ticket"))
    label = "remembered approval (tool: desk.close_ticket)"
    assert [(e.decision, e.rule) for e in events] == [
        ("ask-approved", f"policy.rules[0]; {label}"),
        ("allow", label),
        ("allow", label),
    ]


async def test_call_asks_each_time_and_grants_stay_in_their_session_and_owner(engine):
    codemode, _log, closed = engine
    _, asked = await approve_all(codemode, await codemode.execute(THREE), "call", None)
    assert asked == 3
    first, asked = await approve_all(
        codemode, await codemode.execute(THREE, owner="alice"), "server", "alice"
    )
    assert asked == 1 and first.grants[0]["scope"] == "server"
    _again, asked = await approve_all(
        codemode,
        await codemode.execute(THREE, session=first.session, owner="alice"),
        "call",
        "alice",
    )
    assert asked == 0  # the same session remembers
    other, asked = await approve_all(
        codemode, await codemode.execute(THREE, owner="bob"), "call", "bob"
    )
    assert asked == 3 and other.grants is None  # another owner's session asks again
    assert len(closed) == 12


async def test_an_unknown_scope_is_refused_and_the_call_stays_pending(engine):
    codemode, _log, closed = engine
    paused = await codemode.execute(THREE)
    approval = paused.approval.id
    with pytest.raises(UsageError, match='"tool" \\(this tool, this session\\)'):
        await codemode.approve(approval, True, remember="forever")
    assert closed == []
    done, _ = await approve_all(codemode, await codemode.approve(approval, True), "call", None)
    assert done.status == "ok"

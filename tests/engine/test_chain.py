"""The engine's per-session chain: policy from config, PII tokens, audit of every call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from codemode.audit import AuditFilter, MemoryAuditLog
from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.policy import PolicySettings
from codemode.privacy.settings import PrivacySettings
from codemode.sandbox import Limits, SandboxSettings

pytestmark = pytest.mark.anyio


class Crm:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def crm(self) -> list[Any]:
        def list_contacts() -> list[dict[str, str]]:
            """Contacts with their email addresses."""
            return [
                {"name": "Ada", "email": "ada.lovelace@example.com"},
                {"name": "Bo", "email": "bo@example.org"},
            ]

        def delete_contact(name: str) -> bool:
            """Delete a contact."""
            return True

        return [list_contacts, delete_contact]

    def mail(self) -> list[Any]:
        def send(to: str, subject: str) -> str:
            """Send an email."""
            self.sent.append({"to": to, "subject": subject})
            return f"sent to {to}"

        return [send]


@pytest.fixture
def crm() -> Crm:
    return Crm()


@pytest.fixture
async def engine(crm: Crm) -> AsyncIterator[Codemode]:
    policy = PolicySettings.from_mapping(
        {
            "rules": [{"tools": ["crm.delete_*"], "action": "deny"}],
            "budget": {"per_tool": {"mail.send": 3}},
        },
        "test",
    )
    privacy = PrivacySettings.from_mapping({"flows": {"crm": ["mail"]}}, "test")
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=10), pool_size=1),
        policy=policy,
        privacy=privacy,
    )
    catalog = Catalog([PythonConnector("crm", crm.crm()), PythonConnector("mail", crm.mail())])
    log = MemoryAuditLog()
    async with Codemode(config, catalog=catalog, semantic=False, audit_log=log) as engine:
        yield engine


async def test_code_sees_tokens_and_the_mail_tool_gets_real_addresses(engine: Codemode, crm: Crm):
    code = (
        "from servers import crm, mail\n"
        "people = crm.list_contacts()\n"
        "print(people)\n"
        "for p in people:\n"
        "    print(mail.send(to=p['email'], subject='hi'))\n"
    )
    result = await engine.execute(code)
    assert result.status == "ok", result.render_text()
    assert "@" not in result.stdout
    assert "<EMAIL_1>" in result.stdout and "<EMAIL_2>" in result.stdout
    assert "sent to <EMAIL_1>" in result.stdout  # the tool's echo is tokenized on the way back
    assert [m["to"] for m in crm.sent] == ["ada.lovelace@example.com", "bo@example.org"]


async def test_a_token_in_any_argument_is_restored(engine: Codemode, crm: Crm):
    code = (
        "from servers import crm, mail\n"
        "p = crm.list_contacts()\n"
        "print(mail.send(to='team', subject='about ' + p[0]['email']))\n"
    )
    result = await engine.execute(code)
    assert result.status == "ok"
    assert crm.sent[-1]["subject"] == "about ada.lovelace@example.com"


async def test_by_default_data_reaches_an_open_world_tool_only_if_the_user_allows(crm: Crm):
    # mail.send declares no annotations, so it may reach the outside world: the human decides,
    # in the call's approval, which lists the values by token and origin.
    config = CodemodeConfig(servers={}, sandbox=SandboxSettings(pool_size=0))
    catalog = Catalog([PythonConnector("crm", crm.crm()), PythonConnector("mail", crm.mail())])
    async with Codemode(config, catalog=catalog, semantic=False, audit=False) as engine:
        code = "from servers import crm, mail\nmail.send(to=crm.list_contacts()[0]['email'], subject='x')"
        result = await engine.execute(code)
        assert result.status == "approval_required"
        approval = result.approval
        assert approval.values.to_dict() == {"to": "mail.send", "from": {"crm": ["<EMAIL_1>"]}}
        assert '[privacy.flows] crm = ["crm", "mail"]' in approval.reason
        result = await engine.approve(approval.id, False)
    assert result.status == "error"
    assert result.error is not None and "denied the approval" in result.error["message"]
    assert crm.sent == []


async def test_printing_a_value_the_code_built_is_caught_by_the_second_net(engine: Codemode):
    result = await engine.execute("print('write to ' + 'carl' + '@' + 'example.net')")
    assert "carl@example.net" not in result.stdout
    assert "<EMAIL_" in result.stdout


async def test_denied_tool_raises_and_is_audited(engine: Codemode):
    code = (
        "from servers import crm\n"
        "try:\n    crm.delete_contact(name='Ada')\n"
        "except Exception as e:\n    print(type(e).__name__, e)\n"
    )
    result = await engine.execute(code)
    assert result.stdout.startswith("ToolError")
    assert "denied" in result.stdout
    events = engine.audit_log.query(AuditFilter(tool="crm.delete_contact"))
    assert [(e.decision, e.outcome) for e in events] == [("deny", "denied")]
    assert events[0].session == result.session


async def test_budget_per_tool_stops_the_fourth_call(engine: Codemode, crm: Crm):
    code = (
        "from servers import mail\n"
        "for i in range(5):\n"
        "    try:\n        mail.send(to='x', subject=str(i))\n"
        "    except Exception as e:\n        print(i, e)\n"
    )
    result = await engine.execute(code)
    assert len(crm.sent) == 3
    assert result.stdout.startswith("3 ")
    assert "budget" in result.stdout


async def test_every_call_is_audited_without_arguments_in_clear(engine: Codemode):
    await engine.execute("from servers import crm\ncrm.list_contacts()\n")
    events = engine.audit_log.query(AuditFilter())
    assert any(e.tool == "list_contacts" and e.outcome == "ok" for e in events)
    assert all("example" not in repr(e) for e in events)


async def test_a_call_the_bridge_refuses_is_in_the_audit_log(engine: Codemode):
    code = (
        "from servers._runtime import call_tool\n"
        "for _ in range(50):\n"
        "    try:\n"
        "        call_tool('crm', 'export_everything', {})\n"
        "    except Exception as error:\n"
        "        last = error\n"
        "print(type(last).__name__)\n"
    )
    result = await engine.execute(code)
    assert result.status == "ok", result.render_text()
    assert engine.audit_log is not None
    rows = engine.audit_log.query(AuditFilter(tool="crm.export_everything"))
    assert [(r.outcome, r.error_code, r.count) for r in rows] == [("denied", "tool_not_granted", 1)]
    assert result.session is not None
    await engine.close_session(result.session)  # the session's counts are written at its end
    rows = engine.audit_log.query(AuditFilter(tool="crm.export_everything"))
    assert sum(r.count for r in rows) == 50


async def test_a_long_text_the_tool_quotes_whole_is_the_codes_own_in_the_sandbox(
    engine_config: CodemodeConfig,
) -> None:
    """Through a real sandbox: a tool that saves a document and hands it back after a line of
    its own. The code finds its text in the result as it wrote it (its own addresses in
    clear); the tool's address before it, and one the tool completes across the edge, are
    tokens."""

    def save(text: str) -> str:
        """Save a document; returns it as saved."""
        return f"Saved by ops@corp.example.org for grace.hopper@{text}"

    catalog = Catalog([PythonConnector("docs", [save])])
    code = (
        "from servers import docs\n"
        "body = 'navy.example.com wrote:\\n' + 'Reply to me@mine.example.com today.\\n' * 400\n"
        "saved = docs.save(text=body)\n"
        "head, _, rest = saved.partition(' for ')\n"
        "print(head)\n"
        "print(rest[:8], rest.endswith(body[20:]), 'me@mine.example.com' in rest)\n"
    )
    async with Codemode(engine_config, catalog=catalog, semantic=False) as engine:
        result = await engine.execute(code)
    assert result.status == "ok", result.render_text()
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Saved by <EMAIL_") and "ops@" not in result.stdout
    # The address the tool completed is a token; the rest is the code's text, as written.
    assert lines[1].startswith("<EMAIL_") and lines[1].endswith(" True True")

"""Flows and remembered approvals end to end: the official MCP client against a real
``codemode serve`` over stdio, with the demo CRM and mail servers (real stdio MCP servers).

With no privacy config, contacts copy from the CRM into the mailing list (a closed-world tool)
without any approval; a flow the config forbids is refused before any approval is asked, and
the refusal names the config line that would allow it; ``remember="tool"`` asks once for five
calls, and a remembered grant does not reach another session.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.demo import ACME_LEAD_ID, server_commands
from codemode.privacy.assertions import assert_no_pii, find_pii
from codemode.tokens import count_tokens
from tests.gateway.conftest import client_for, stdio_target, write_config

pytestmark = pytest.mark.anyio


def _gateway_config(root: Path, extra: str = "") -> tuple[Path, Path]:
    data = root / "data"
    commands = server_commands(data)
    config = write_config(root, {name: commands[name] for name in ("crm", "mail")}, pool_size=1)
    if extra:
        config.write_text(config.read_text() + extra, encoding="utf-8")
    return config, data


@pytest.fixture(scope="module")
def default_config(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _gateway_config(tmp_path_factory.mktemp("flows-default"))


@pytest.fixture(scope="module")
async def client(default_config: tuple[Path, Path]) -> AsyncIterator[Any]:
    async with client_for(stdio_target(default_config[0])) as client:
        yield client


COPY = """
from servers import crm, mail
contacts = crm.list_contacts(country="Germany", limit=20)["contacts"]
for c in contacts:
    mail.add_subscriber(list_name="de-customers", email=c["email"], name=c["name"])
print(len(contacts), contacts[0]["email"])
"""


async def test_copying_customers_into_a_closed_world_server_needs_no_config_or_approval(
    client: Any, default_config: tuple[Path, Path]
):
    result = await client.call_tool("execute", {"code": COPY})
    content = result.structured_content
    assert content["status"] == "ok", result.content[0].text
    count, email = content["stdout"].split()
    assert email.startswith("<EMAIL_")
    assert_no_pii(result.model_dump_json(by_alias=True))
    with sqlite3.connect(default_config[1] / "mail.sqlite") as db:
        stored = [
            row[0]
            for row in db.execute("SELECT email FROM subscribers WHERE list_name = 'de-customers'")
        ]
    assert len(stored) == int(count) > 0
    assert all(find_pii(address, kinds=("EMAIL",)) for address in stored)  # real addresses


async def test_an_open_world_destination_is_decided_in_the_calls_approval(
    client: Any, default_config: tuple[Path, Path]
):
    code = (
        "from servers import crm, mail\n"
        "c = crm.list_contacts(country='Germany', limit=1)['contacts'][0]\n"
        "mail.send_email(to=c['email'], subject='Hello', body='Welcome')\n"
        "print('sent')\n"
    )
    paused = await client.call_tool("execute", {"code": code})
    content = paused.structured_content
    assert content["status"] == "approval_required", paused.content[0].text
    approval = content["approval"]
    token = approval["arguments"]["to"]
    assert token.startswith("<EMAIL_")
    assert approval["values"] == {"to": "mail.send_email", "from": {"crm": [token]}}
    assert '[privacy.flows] crm = ["crm", "mail"]' in approval["reason"]
    assert f"sends values from crm: {token}" in paused.content[0].text
    assert_no_pii(paused.model_dump_json(by_alias=True))
    done = await client.call_tool("approve", {"approval": approval["id"], "allow": True})
    assert done.structured_content["status"] == "ok"
    with sqlite3.connect(default_config[1] / "mail.sqlite") as db:
        (sent,) = db.execute("SELECT count(*) FROM outbox WHERE subject = 'Hello'").fetchone()
    assert sent == 1


FIVE_UPDATES = f"""
from servers import crm
for stage in ["Qualification", "Proposal", "Negotiation", "Proposal", "Closed Won"]:
    crm.update_lead(lead_id="{ACME_LEAD_ID}", fields={{"stage": stage}})
print("done")
"""


async def test_remember_tool_asks_once_for_five_calls_and_never_in_another_session(
    client: Any, default_config: tuple[Path, Path]
):
    paused = await client.call_tool("execute", {"code": FIVE_UPDATES})
    content = paused.structured_content
    assert content["status"] == "approval_required"
    assert content["approval"]["tool"] == "crm.update_lead"
    session = content["session"]
    done = await client.call_tool(
        "approve", {"approval": content["approval"]["id"], "allow": True, "remember": "tool"}
    )
    finished = done.structured_content
    assert finished["status"] == "ok", done.content[0].text  # no second approval
    assert finished["stdout"] == "done\n"
    assert _stage(default_config[1]) == "Closed Won"
    assert [(g["scope"], g["target"]) for g in finished["grants"]] == [("tool", "crm.update_lead")]
    again = await client.call_tool("execute", {"code": FIVE_UPDATES, "session": session})
    assert again.structured_content["status"] == "ok"  # the same session remembers

    other = await client.call_tool("execute", {"code": FIVE_UPDATES, "session": "new"})
    other_content = other.structured_content
    assert other_content["session"] != session
    assert other_content["status"] == "approval_required"  # grants stay in their session
    assert "grants" not in other_content
    denied = await client.call_tool(
        "approve", {"approval": other_content["approval"]["id"], "allow": False}
    )
    assert denied.structured_content["status"] == "error"


async def test_remember_must_be_one_of_the_scopes(client: Any):
    paused = await client.call_tool("execute", {"code": FIVE_UPDATES, "session": "new"})
    approval = paused.structured_content["approval"]["id"]
    wrong = await client.call_tool(
        "approve", {"approval": approval, "allow": True, "remember": "forever"}
    )
    assert wrong.is_error
    assert 'remember="tool"' in wrong.content[0].text
    await client.call_tool("approve", {"approval": approval, "allow": False})


async def test_a_forbidden_flow_is_refused_before_any_approval_naming_the_line(
    tmp_path: Path,
):
    config, data = _gateway_config(tmp_path, '\n[privacy.flows]\nmail = ["mail"]\n')
    # mail data may not go to crm; crm.update_lead is destructive and would ask otherwise.
    code = (
        "from servers import mail, crm\n"
        "mail.add_subscriber(list_name='n', email='someone@example.com')\n"
        "subs = mail.list_subscribers(list_name='n')['subscribers']\n"
        f"crm.update_lead(lead_id='{ACME_LEAD_ID}', fields={{'notes': subs[0]['email']}})\n"
    )
    async with client_for(stdio_target(config)) as client:
        result = await client.call_tool("execute", {"code": code})
    content = result.structured_content
    assert content["status"] == "error", result.content[0].text  # not approval_required
    message = content["error"]["message"]
    assert "may not be sent to 'crm'" in message
    assert '[privacy.flows] mail = ["mail", "crm"]' in message
    assert "nothing was asked or sent" in message
    assert count_tokens(message) < 120
    assert_no_pii(result.model_dump_json(by_alias=True))
    assert "someone@example.com" not in _notes(data)


def _stage(data: Path) -> str:
    with sqlite3.connect(data / "crm.sqlite") as db:
        (stage,) = db.execute("SELECT stage FROM leads WHERE id = ?", (ACME_LEAD_ID,)).fetchone()
    return str(stage)


def _notes(data: Path) -> str:
    with sqlite3.connect(data / "crm.sqlite") as db:
        (notes,) = db.execute("SELECT notes FROM leads WHERE id = ?", (ACME_LEAD_ID,)).fetchone()
    return str(notes)

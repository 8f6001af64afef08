"""Privacy and control end to end: the official MCP client against a real `codemode serve`.

CRM contacts flow into a mailing tool; every complete MCP response the client receives is
scanned for personal data, and the mail server's own database is checked for the real values.
A destructive call pauses for approval and runs exactly once after `approve`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.demo import ACME_LEAD_ID, server_commands
from codemode.privacy.assertions import assert_no_pii, find_pii
from tests.gateway.conftest import client_for, stdio_target, write_config

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def privacy_config(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("privacy")
    data = root / "data"
    commands = server_commands(data)
    config = write_config(root, {name: commands[name] for name in ("crm", "mail")}, pool_size=1)
    # mail's data goes back to mail only (without its line, the default would let it reach
    # crm's closed-world tools).
    flows = '\n[privacy.flows]\ncrm = ["mail"]\nmail = ["mail"]\n'
    config.write_text(config.read_text() + flows, encoding="utf-8")
    return config, data


@pytest.fixture(scope="module")
async def client(privacy_config: tuple[Path, Path]) -> AsyncIterator[Any]:
    async with client_for(stdio_target(privacy_config[0])) as client:
        yield client


def _wire(result: Any) -> str:
    """The complete response as it crossed the wire (text content and structured content)."""
    return result.model_dump_json(by_alias=True)


CODE = """
from servers import crm, mail
contacts = crm.list_contacts(country="Germany", limit=50)["contacts"]
for c in contacts:
    mail.add_subscriber(list_name="de-launch", email=c["email"], name=c["name"])
print(len(contacts), contacts[0]["email"], contacts[0]["phone"])
print(contacts[:3])
"""


async def test_contacts_reach_the_mailing_tool_but_no_pii_reaches_the_client(
    client: Any, privacy_config: tuple[Path, Path]
):
    result = await client.call_tool("execute", {"code": CODE})
    assert result.structured_content["status"] == "ok", result.content[0].text
    count, email, phone = result.structured_content["stdout"].split("\n")[0].split()
    assert email.startswith("<EMAIL_") and phone.startswith("<PHONE_")
    assert_no_pii(_wire(result))
    with sqlite3.connect(privacy_config[1] / "mail.sqlite") as db:
        stored = [
            row[0]
            for row in db.execute("SELECT email FROM subscribers WHERE list_name = 'de-launch'")
        ]
    assert len(stored) == int(count) > 0
    assert all(find_pii(address, kinds=("EMAIL",)) for address in stored)


async def test_a_forbidden_flow_is_refused_and_nothing_leaks(client: Any):
    # mail -> crm is not in the flow rules: a subscriber address may not go into the CRM.
    code = (
        "from servers import mail, crm\n"
        "subs = mail.list_subscribers(list_name='newsletter')['subscribers']\n"
        "crm.append_note(lead_id='LEAD-0001', note=subs[0]['email'])\n"
    )
    result = await client.call_tool("execute", {"code": code})
    assert result.structured_content["status"] == "error"
    assert "may not be sent to 'crm'" in result.structured_content["error"]["message"]
    assert_no_pii(_wire(result))


async def test_a_destructive_call_waits_for_approval_and_runs_once(
    client: Any, privacy_config: tuple[Path, Path]
):
    code = (
        "from servers import crm\n"
        f"crm.update_lead(lead_id='{ACME_LEAD_ID}', fields={{'stage': 'Closed Won'}})\n"
        "print('updated')\n"
    )
    paused = await client.call_tool("execute", {"code": code})
    content = paused.structured_content
    assert content["status"] == "approval_required"
    assert content["approval"]["tool"] == "crm.update_lead"
    assert not paused.is_error
    stage = _stage(privacy_config[1])
    assert stage != "Closed Won"
    done = await client.call_tool("approve", {"approval": content["approval"]["id"], "allow": True})
    assert done.structured_content["status"] == "ok"
    assert done.structured_content["stdout"] == "updated\n"
    assert done.structured_content["session"] == content["session"]
    assert _stage(privacy_config[1]) == "Closed Won"
    again = await client.call_tool(
        "approve", {"approval": content["approval"]["id"], "allow": True}
    )
    assert again.is_error  # an approval is answered once


def _stage(data: Path) -> str:
    with sqlite3.connect(data / "crm.sqlite") as db:
        (stage,) = db.execute("SELECT stage FROM leads WHERE id = ?", (ACME_LEAD_ID,)).fetchone()
    return str(stage)


async def test_what_the_code_sent_comes_back_as_sent_and_the_servers_data_as_tokens(client: Any):
    """A subscriber the code adds is answered with the address and name it sent: those come
    back as the code wrote them (no token for its own words). The same address read from the
    list is the mail server's data: a token."""
    code = (
        "from servers import mail\n"
        "added = mail.add_subscriber(list_name='vip', email='new.person@example.org', "
        "name='New Person')\n"
        "print(added['email'] == 'new.person@example.org', added['name'] == 'New Person')\n"
        "subs = mail.list_subscribers(list_name='vip')['subscribers']\n"
        "print(subs[-1]['email'].startswith('<EMAIL_'))\n"
    )
    result = await client.call_tool("execute", {"code": code})
    assert result.structured_content["status"] == "ok", result.content[0].text
    assert result.structured_content["stdout"] == "True True\nTrue\n"
    assert_no_pii(_wire(result))

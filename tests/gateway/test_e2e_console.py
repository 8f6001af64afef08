"""The operator console end to end over HTTP: the gateway's tokens, operators only; sessions,
a pending approval, the token ledger and the audit log with filters, from real MCP traffic."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from codemode.demo import ACME_LEAD_ID, server_commands

pytestmark = pytest.mark.anyio

READ_AND_REFUSED = f"""
from servers import crm, ToolError
print(crm.get_lead(lead_id='{ACME_LEAD_ID}')['stage'])
try:
    crm.delete_lead(lead_id='{ACME_LEAD_ID}')
except ToolError:
    print('refused')
"""
SAVE_SKILL = """
from skills import save
def double(x: int) -> int:
    \"\"\"Twice x.\"\"\"
    return 2 * x
print(save(double, tests="from skills import double\\ndef test_two():\\n    assert double(2) == 4\\n"))
"""
PAUSING = f"""
from servers import crm
crm.update_lead(lead_id='{ACME_LEAD_ID}', fields={{'notes': 'console'}})
"""


@pytest.fixture(scope="module")
async def console_gateway(
    tmp_path_factory: pytest.TempPathFactory, harness: Any
) -> AsyncIterator[dict[str, Any]]:
    """A gateway where MAIN is the operator and alice is not, with some traffic: a finished
    execution, one paused at an approval, a search."""
    root = tmp_path_factory.mktemp("console")
    demo = server_commands(root / "data")
    config = harness.write_config(
        root,
        {"docs": demo["docs"], "crm": demo["crm"]},
        pool_size=1,
        gateway={"operators": f'["{harness.MAIN}"]'},
    )
    rule = '\n[[policy.rules]]\ntools = ["crm.delete_lead"]\naction = "deny"\n'
    config.write_text(config.read_text() + rule, encoding="utf-8")
    http = harness.HTTPGateway(config, root / "gateway-http.log").start()
    try:
        target = harness.http_target(http.url, harness.bearer(harness.MAIN))
        async with harness.client_for(target) as client:
            done = await harness.execute_ok(client, READ_AND_REFUSED)
            assert done["stdout"].endswith("refused\n"), done["text"]
            await harness.execute_ok(client, SAVE_SKILL)
            paused = await harness.execute(client, PAUSING, session="new")
            assert paused["status"] == "approval_required", paused["text"]
            yield {
                "http": http,
                "base": http.url.removesuffix("/mcp"),
                "done": done["session"],
                "paused": paused["session"],
            }
    finally:
        left = http.stop()
        assert not left, f"the gateway left processes behind: {sorted(left)}"


async def test_only_an_operators_token_opens_the_console(
    console_gateway: dict[str, Any], harness: Any
) -> None:
    base = console_gateway["base"]
    async with httpx.AsyncClient() as web:
        nobody = await web.get(f"{base}/console")
        assert nobody.status_code == 401 and 'name="token"' in nobody.text
        alice = await web.get(f"{base}/console", headers=harness.bearer("alice"))
        assert alice.status_code == 401
        wrong = await web.get(f"{base}/console", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        main = await web.get(f"{base}/console", headers=harness.bearer(harness.MAIN))
        assert main.status_code == 200


async def test_the_overview_shows_sessions_the_pending_approval_and_the_ledger(
    console_gateway: dict[str, Any], harness: Any
) -> None:
    async with httpx.AsyncClient() as web:
        page = await web.get(
            f"{console_gateway['base']}/console", headers=harness.bearer(harness.MAIN)
        )
    html = page.text
    assert console_gateway["done"] in html and console_gateway["paused"] in html
    assert ">paused<" in html and ">idle<" in html
    pending = html.split(">Pending approvals</h2>")[1].split("<h2")[0]
    assert "crm.update_lead" in pending and console_gateway["paused"] in pending
    ledger = html.split(">Tokens per session</h2>")[1]
    assert console_gateway["done"] in ledger
    assert '<svg role="img"' in html  # the chart, labelled
    skills = html.split(">Skills</h2>")[1].split("<h2")[0]
    assert "/double</code>" in skills and "Twice x." in skills


async def test_signing_in_with_the_form_keeps_a_cookie_and_refuses_other_sites(
    console_gateway: dict[str, Any], harness: Any
) -> None:
    base = console_gateway["base"]
    token = harness.TOKENS[harness.MAIN]
    async with httpx.AsyncClient() as web:
        forged = await web.post(
            f"{base}/console/login", data={"token": token}, headers={"Origin": "https://x.test"}
        )
        assert forged.status_code == 403 and "codemode_console" not in web.cookies
        refused = await web.post(f"{base}/console/login", data={"token": harness.TOKENS["alice"]})
        assert refused.status_code == 401
        signed = await web.post(f"{base}/console/login", data={"token": token})
        assert signed.status_code == 303
        assert (await web.get(f"{base}/console")).status_code == 200
        out = await web.post(f"{base}/console/logout")
        assert out.status_code == 303
        assert (await web.get(f"{base}/console")).status_code == 401


async def test_the_audit_log_filters_by_tool_and_decision(
    console_gateway: dict[str, Any], harness: Any
) -> None:
    base = console_gateway["base"]
    headers = harness.bearer(harness.MAIN)
    async with httpx.AsyncClient() as web:
        everything = (await web.get(f"{base}/console/audit", headers=headers)).text
        crm = (await web.get(f"{base}/console/audit?tool=crm.*", headers=headers)).text
        docs = (await web.get(f"{base}/console/audit?tool=docs.*", headers=headers)).text
        denied = (await web.get(f"{base}/console/audit?decision=deny", headers=headers)).text
    assert "crm.get_lead" in everything and "crm.delete_lead" in everything
    assert "No calls match." in docs and "<table" not in docs
    assert 'value="crm.*"' in crm and "crm.get_lead" in crm
    # decision=deny keeps the refused delete, not the read.
    assert "<option selected>deny</option>" in denied
    rows = denied.split("<tbody>")[1]
    assert "crm.delete_lead" in rows and "crm.get_lead" not in rows

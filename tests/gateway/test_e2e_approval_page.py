"""The approval page (MCP elicitation, URL mode) end to end, driven over plain HTTP.

A real HTTP gateway with ``policy.approvals = "url"``; the official Python client declares
URL elicitation and "goes" to the page; the page is loaded and submitted as a browser would.
The owner's own values appear on the page and never in any MCP result.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import types

from codemode.demo import ACME_LEAD_ID, server_commands
from codemode.privacy.assertions import assert_no_pii

pytestmark = pytest.mark.anyio

CODE = f"""
from servers import crm, ToolError
email = crm.get_lead(lead_id='{ACME_LEAD_ID}')['email']
print('about to note', email)
try:
    crm.update_lead(lead_id='{ACME_LEAD_ID}', fields={{'notes': 'write to ' + email}})
    print('updated')
except ToolError as error:
    print('denied:', error)
"""


@pytest.fixture(scope="module")
async def page_gateway(
    tmp_path_factory: pytest.TempPathFactory, harness: Any
) -> AsyncIterator[tuple[Any, Path]]:
    root = tmp_path_factory.mktemp("approval-page")
    data = root / "data"
    demo = server_commands(data)
    config = harness.write_config(root, {"crm": demo["crm"]}, pool_size=1)
    config.write_text(config.read_text() + '\n[policy]\napprovals = "url"\n', encoding="utf-8")
    http = harness.HTTPGateway(config, root / "gateway-http.log").start()
    try:
        yield http, data
    finally:
        left = http.stop()
        assert not left, f"the gateway left processes behind: {sorted(left)}"


def lead(data: Path) -> tuple[str, str]:
    with sqlite3.connect(data / "crm.sqlite") as db:
        email, notes = db.execute(
            "SELECT email, notes FROM leads WHERE id = ?", (ACME_LEAD_ID,)
        ).fetchone()
    return str(email), str(notes)


Browser = Callable[[str], Awaitable[None]]


async def run_with_page(
    http: Any, harness: Any, browse: Browser, *, mode: str = "auto"
) -> types.CallToolResult:
    """Execute CODE with a client that accepts URL elicitations; ``browse(url)`` plays the
    person on the page while the call waits."""
    urls: list[str] = []
    sent = anyio.Event()

    async def go_to_page(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams), params
        urls.append(params.url)
        sent.set()
        return types.ElicitResult(action="accept")

    results: list[types.CallToolResult] = []
    target = harness.http_target(http.url, harness.bearer(harness.MAIN))
    async with harness.client_for(target, mode=mode, elicitation_callback=go_to_page) as client:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                results.append(await client.call_tool("execute", {"code": CODE, "session": "new"}))

            group.start_soon(call)
            with anyio.fail_after(60):
                await sent.wait()
            await browse(urls[0])
    return results[0]


def form_of(html: str) -> dict[str, str]:
    csrf = re.search(r'name="csrf" value="([^"]+)"', html)
    assert csrf is not None, html
    return {"csrf": csrf.group(1)}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_page_reveals_the_values_and_approving_resumes_the_call(
    page_gateway: tuple[Any, Path], harness: Any, mode: str
) -> None:
    http, data = page_gateway
    email, _ = lead(data)
    pages: list[str] = []

    async def approve(url: str) -> None:
        async with httpx.AsyncClient() as browser:
            page = await browser.get(url)
            assert page.status_code == 200
            pages.append(page.text)
            done = await browser.post(url, data={**form_of(page.text), "decision": "allow_call"})
            assert done.status_code == 200 and "Allowed once" in done.text
            # The link works once: loading or using it again is refused.
            assert (await browser.get(url)).status_code == 410
            again = await browser.post(url, data={**form_of(page.text), "decision": "deny"})
            assert again.status_code == 410

    result = await run_with_page(http, harness, approve, mode=mode)
    data_out = harness.structured(result)
    assert data_out["status"] == "ok", harness.text_of(result)
    assert data_out["stdout"].endswith("updated\n")
    # The owner sees their own value on the page: in the arguments and the printed output.
    assert email in pages[0] and f"write to {email}" in pages[0]
    assert f"about to note {email}" in pages[0]
    assert "sha256:" in pages[0]
    # What the flow rules allow: the address came from crm and goes back to crm.
    assert "to crm: from crm: allowed (the same server)" in pages[0]
    # The model never does.
    wire = result.model_dump_json(by_alias=True)
    assert email not in wire
    assert_no_pii(wire)
    assert lead(data)[1] == f"write to {email}"


async def test_denying_on_the_page_keeps_the_call_from_running(
    page_gateway: tuple[Any, Path], harness: Any
) -> None:
    http, data = page_gateway
    before = lead(data)[1]

    async def deny(url: str) -> None:
        async with httpx.AsyncClient() as browser:
            page = await browser.get(url)
            done = await browser.post(url, data={**form_of(page.text), "decision": "deny"})
            assert done.status_code == 200 and "Denied" in done.text

    result = await run_with_page(http, harness, deny)
    assert harness.structured(result)["stdout"].split("\n")[-2].startswith("denied:")
    assert lead(data)[1] == before


async def test_forged_and_foreign_decisions_are_refused(
    page_gateway: tuple[Any, Path], harness: Any
) -> None:
    http, data = page_gateway
    before = lead(data)[1]

    async def attack_then_deny(url: str) -> None:
        async with httpx.AsyncClient() as browser, httpx.AsyncClient() as other:
            page = await browser.get(url)
            form = form_of(page.text)
            # Another browser (no cookie) can neither load nor use the link.
            assert (await other.get(url)).status_code == 410
            assert (
                await other.post(url, data={**form, "decision": "allow_call"})
            ).status_code == 410
            # A wrong check value, or a post from another site, is refused.
            wrong = {"csrf": "x" * len(form["csrf"]), "decision": "allow_call"}
            assert (await browser.post(url, data=wrong)).status_code == 410
            foreign = await browser.post(
                url,
                data={**form, "decision": "allow_call"},
                headers={"Origin": "https://evil.test"},
            )
            assert foreign.status_code == 410
            cross_site = await browser.post(
                url,
                data={**form, "decision": "allow_call"},
                headers={"Sec-Fetch-Site": "cross-site", "Origin": "null"},
            )
            assert cross_site.status_code == 410
            done = await browser.post(url, data={**form, "decision": "deny"})
            assert done.status_code == 200

    result = await run_with_page(http, harness, attack_then_deny)
    assert "denied:" in harness.structured(result)["stdout"]
    assert lead(data)[1] == before


async def test_the_mcp_endpoint_still_needs_the_bearer_token(
    page_gateway: tuple[Any, Path],
) -> None:
    http, _ = page_gateway
    async with httpx.AsyncClient() as plain:
        response = await plain.post(http.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401


async def test_links_use_the_public_url_and_declining_the_page_denies(
    tmp_path: Path, harness: Any
) -> None:
    """Behind a proxy, links name ``[gateway] public_url``; a user who declines to open the
    page denies the call."""
    demo = server_commands(tmp_path / "data")
    public = "https://approvals.example.test/base"
    config = harness.write_config(
        tmp_path, {"crm": demo["crm"]}, pool_size=1, gateway={"public_url": f'"{public}"'}
    )
    config.write_text(config.read_text() + '\n[policy]\napprovals = "url"\n', encoding="utf-8")
    http = harness.HTTPGateway(config, tmp_path / "gateway-http.log").start()
    urls: list[str] = []

    async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        urls.append(params.url)
        return types.ElicitResult(action="decline")

    try:
        target = harness.http_target(http.url, harness.bearer(harness.MAIN))
        async with harness.client_for(target, elicitation_callback=decline) as client:
            result = await client.call_tool("execute", {"code": CODE})
    finally:
        assert not http.stop()
    assert urls and urls[0].startswith(f"{public}/approve/")
    assert "denied:" in harness.structured(result)["stdout"]

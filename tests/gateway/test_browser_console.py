"""The operator console in a real browser (Chromium driven by Playwright; see
test_browser_approval_page.py for how it is installed): sign in with the keyboard, read the
overview, filter the audit log."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gateway.test_browser_approval_page import _screenshot, browser
from tests.gateway.test_e2e_console import console_gateway

pytestmark = pytest.mark.anyio

__all__ = ["browser", "console_gateway"]  # module-scoped fixtures shared with other modules


async def test_an_operator_signs_in_and_filters_the_audit_log(
    browser: Any, console_gateway: dict[str, Any], harness: Any
) -> None:
    context = await browser.new_context(viewport={"width": 1000, "height": 900})
    page = await context.new_page()
    response = await page.goto(f"{console_gateway['base']}/console")
    assert response is not None and response.status == 401
    # Keyboard only: the token field has a label; Enter submits.
    await page.get_by_label("Bearer token").focus()
    await page.keyboard.type(harness.TOKENS[harness.MAIN])
    async with page.expect_navigation():
        await page.keyboard.press("Enter")
    assert await page.get_by_role("heading", name="Pending approvals").is_visible()
    assert console_gateway["paused"] in await page.content()
    assert await page.get_by_role("img", name="Tokens per session").count() == 1
    shot = _screenshot("console.png")
    if shot is not None:
        await page.screenshot(path=str(shot), full_page=True)
    await page.get_by_role("link", name="Audit log").click()
    await page.get_by_label("Decision").select_option("deny")
    async with page.expect_navigation():
        await page.get_by_role("button", name="Filter").click()
    rows = page.locator("tbody tr")
    assert await rows.count() >= 1
    assert "crm.delete_lead" in await rows.first.inner_text()
    assert "decision=deny" in page.url
    await context.close()

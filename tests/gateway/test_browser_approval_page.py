"""The approval page in a real browser: Debian's Chromium driven by Playwright.

``make test`` installs both where it can (root: apt-get; the ``browser`` extra) and sets
``CODEMODE_EXPECT_BROWSER=1``: then a missing browser fails these tests instead of skipping
them. The page is loaded, read and clicked as a person would (keyboard for the approval);
the owner's values appear on the page and never in the MCP result; a reused link is refused.
Screenshots go to ``$CODEMODE_SCREENSHOTS`` when it is set (docs/ holds the committed ones).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.privacy.assertions import assert_no_pii
from tests.gateway.test_e2e_approval_page import lead, page_gateway, run_with_page

pytestmark = pytest.mark.anyio

CHROMIUM = Path(os.environ.get("CODEMODE_CHROMIUM", "/usr/bin/chromium"))
INSTALL_HINT = (
    "install them with `make setup-browser` (as root: apt-get install chromium; "
    "pip install -e '.[browser]')"
)

__all__ = ["page_gateway"]  # the module-scoped gateway fixture, shared with the HTTP tests


def _missing() -> str | None:
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed"
    if not os.access(CHROMIUM, os.X_OK):
        return f"Chromium is not at {CHROMIUM}"
    return None


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    missing = _missing()
    if missing is not None:
        if os.environ.get("CODEMODE_EXPECT_BROWSER") == "1":
            pytest.fail(f"CODEMODE_EXPECT_BROWSER=1 but {missing}: {INSTALL_HINT}")
        pytest.skip(f"{missing}: {INSTALL_HINT}")
    from playwright.async_api import async_playwright

    async with async_playwright() as driver:
        chromium = await driver.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield chromium
        finally:
            await chromium.close()


def _screenshot(name: str) -> Path | None:
    folder = os.environ.get("CODEMODE_SCREENSHOTS")
    return Path(folder) / name if folder else None


async def test_a_person_approves_in_the_browser_with_the_keyboard(
    browser: Any, page_gateway: tuple[Any, Path], harness: Any
) -> None:
    http, data = page_gateway
    email, _ = lead(data)
    seen: list[str] = []

    async def person(url: str) -> None:
        context = await browser.new_context(viewport={"width": 900, "height": 870})
        page = await context.new_page()
        response = await page.goto(url)
        assert response is not None and response.status == 200
        arguments = await page.get_by_test_id("arguments").inner_text()
        printed = await page.get_by_test_id("printed").inner_text()
        seen.extend([arguments, printed])
        shot = _screenshot("approval-page.png")
        if shot is not None:
            await page.screenshot(path=str(shot))
        # Keyboard only: focus the "Allow once" button and press Enter.
        allow = page.get_by_role("button", name="Allow once")
        await allow.focus()
        async with page.expect_navigation():
            await page.keyboard.press("Enter")
        assert "Allowed once" in await page.get_by_role("status").inner_text()
        # The same link again, in the same browser: refused.
        again = await page.goto(url)
        assert again is not None and again.status == 410
        assert "cannot be used" in await page.content()
        await context.close()

    result = await run_with_page(http, harness, person)
    assert harness.structured(result)["stdout"].endswith("updated\n")
    assert email in seen[0] and email in seen[1]
    wire = result.model_dump_json(by_alias=True)
    assert email not in wire
    assert_no_pii(wire)
    assert lead(data)[1] == f"write to {email}"


async def test_a_person_denies_in_the_browser(
    browser: Any, page_gateway: tuple[Any, Path], harness: Any
) -> None:
    http, data = page_gateway
    before = lead(data)[1]

    async def person(url: str) -> None:
        context = await browser.new_context()
        page = await context.new_page()
        await page.goto(url)
        async with page.expect_navigation():
            await page.get_by_role("button", name="Deny").click()
        assert "Denied" in await page.get_by_role("status").inner_text()
        # Another browser (a fresh context, no cookie) cannot use the link either.
        other = await (await browser.new_context()).new_page()
        refused = await other.goto(url)
        assert refused is not None and refused.status == 410
        await context.close()

    result = await run_with_page(http, harness, person)
    assert "denied:" in harness.structured(result)["stdout"]
    assert lead(data)[1] == before

"""Approval links on their own: single use, expiry (on an injected clock), one browser."""

from __future__ import annotations

import pytest

from codemode.errors import ApprovalLinkError
from codemode.gateway.web.links import ApprovalLinks
from codemode.testing import ManualClock

pytestmark = pytest.mark.anyio

APPROVAL = {"id": "ap_test", "tool": "crm.update_lead", "digest": "sha256:0", "arguments": {}}


async def test_an_expired_link_is_refused_and_its_wait_denies() -> None:
    clock = ManualClock()
    links = ApprovalLinks("http://127.0.0.1:1", ttl_s=60, clock=clock)
    link = links.mint(APPROVAL, owner="main", session="s_1", revealed={})
    secret = links.url(link).rsplit("/", 1)[1]
    _, browser = links.open(secret, None)
    clock.now += 61
    with pytest.raises(ApprovalLinkError, match="expired"):
        links.open(secret, browser)
    with pytest.raises(ApprovalLinkError, match="expired"):
        links.decide(secret, browser, link.csrf, "allow_call")
    assert await links.wait("ap_test") == "deny"


async def test_a_link_decides_once_and_its_waiter_hears_it() -> None:
    links = ApprovalLinks("http://127.0.0.1:1")
    link = links.mint(APPROVAL, owner="main", session="s_1", revealed={})
    assert links.mint(APPROVAL, owner="main", session="s_1", revealed={}) is link
    secret = links.url(link).rsplit("/", 1)[1]
    _, browser = links.open(secret, None)
    with pytest.raises(ApprovalLinkError, match="another browser"):
        links.open(secret, "someone-else")
    with pytest.raises(ApprovalLinkError, match="unknown decision"):
        links.decide(secret, browser, link.csrf, "allow_everything")
    links.decide(secret, browser, link.csrf, "allow_tool")
    assert await links.wait("ap_test") == "allow_tool"
    with pytest.raises(ApprovalLinkError, match="already decided"):
        links.decide(secret, browser, link.csrf, "deny")
    with pytest.raises(ApprovalLinkError, match="unknown"):
        links.open("not-a-secret", browser)

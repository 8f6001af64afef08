"""Who answers an approval, by ``policy.approvals`` and what the client declared; and how a
client's answer is read (anything but an accepted allow denies)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from mcp import types

from codemode.gateway.elicitation import ApprovalRouter, UserChannel, approval_form, decision_of
from codemode.gateway.web.links import ApprovalLinks
from codemode.policy.approval import ApprovalRequest


class StubEngine:
    shared = None

    def __init__(self, mode: str) -> None:
        self.config = SimpleNamespace(policy=SimpleNamespace(approvals=mode))

    async def approve(self, approval_id: str, allow: bool, **_: Any) -> None:
        raise AssertionError("not called here")


FORM = UserChannel(form=True, url=False)
URL_ONLY = UserChannel(form=False, url=True)
BOTH = UserChannel(form=True, url=True)


@pytest.mark.parametrize(
    ("mode", "user", "page", "route"),
    [
        ("auto", None, True, "tool"),
        ("auto", FORM, True, "ask"),
        ("auto", BOTH, True, "ask"),
        ("auto", URL_ONLY, True, "url"),
        ("auto", URL_ONLY, False, "tool"),  # stdio: no page, and no form to fall back on
        ("elicit", None, True, "deny"),
        ("elicit", FORM, False, "ask"),
        ("url", BOTH, True, "url"),
        ("url", BOTH, False, "ask"),  # stdio: the form instead of the page
        ("url", None, True, "deny"),
        ("url", URL_ONLY, False, "deny"),
        ("tool", BOTH, True, "tool"),
    ],
)
def test_routes(mode: str, user: UserChannel | None, page: bool, route: str) -> None:
    links = ApprovalLinks("http://127.0.0.1:1") if page else None
    router = ApprovalRouter(StubEngine(mode), links=links)  # type: ignore[arg-type]  # a stub
    assert router.route(user) == route


def test_answers_are_read_strictly() -> None:
    accept = types.ElicitResult(action="accept", content={"decision": "allow_call"})
    assert decision_of(accept) == (True, "call")
    assert decision_of({"action": "accept", "content": {"decision": "allow_tool"}}) == (
        True,
        "tool",
    )
    for denied in (
        types.ElicitResult(action="decline"),
        types.ElicitResult(action="cancel"),
        types.ElicitResult(action="accept", content={"decision": "deny"}),
        types.ElicitResult(action="accept", content={"decision": "allow_everything"}),
        types.ElicitResult(action="accept"),
        {"action": "accept", "content": "allow_call"},
        "allow_call",
        None,
    ):
        assert decision_of(denied) == (False, "call"), denied


def test_the_form_describes_the_call_and_offers_three_answers() -> None:
    approval = ApprovalRequest(
        id="ap_1",
        tool="crm.delete_lead",
        arguments={"lead_id": "LEAD-1", "note": "x" * 5000},
        digest="sha256:abc",
        reason="destructive",
    )
    message, schema = approval_form(approval)
    assert "crm.delete_lead" in message and "sha256:abc" in message and "ap_1" in message
    assert "LEAD-1" in message and "characters)" in message  # long arguments are cut, saying so
    choices = [option["const"] for option in schema["properties"]["decision"]["oneOf"]]
    assert choices == ["allow_call", "allow_tool", "deny"]
    assert schema["required"] == ["decision"]


def test_the_form_shows_the_end_of_what_the_code_printed() -> None:
    approval = ApprovalRequest("ap_1", "crm.delete_lead", {"lead_id": "L"}, "x", "sha256:abc")
    assert "printed" not in approval_form(approval)[0]  # nothing printed, no section
    message, _ = approval_form(approval, "start\n" + "y" * 3000 + "\ndeleting 12 leads\n")
    assert message.index("deleting 12 leads") < message.index("Digest:")
    assert "start" not in message and "(3,024 characters, the last shown)" in message

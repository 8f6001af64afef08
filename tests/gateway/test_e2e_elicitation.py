"""Approvals through MCP elicitation: the official Python client declares it, over stdio and
HTTP, in the 2026-07-28 protocol (rounds of InputRequiredResult) and in the 2025 one (an
elicitation/create request while execute waits). The model never sees approval_required.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types

from codemode.demo import ACME_LEAD_ID, server_commands

pytestmark = pytest.mark.anyio


def update(stage: str) -> str:
    """Code that sets the Acme lead's stage (a destructive call) and says how it went."""
    return (
        "from servers import crm, ToolError\n"
        "try:\n"
        f"    crm.update_lead(lead_id='{ACME_LEAD_ID}', fields={{'notes': {stage!r}}})\n"
        "    print('updated')\n"
        "except ToolError as error:\n"
        "    print('denied:', error)\n"
    )


# Every test starts a session of its own ("new"): an HTTP client's default session is shared
# by the owner's calls, and a tool allowed for the session would not be asked again.


@dataclass
class Person:
    """The user behind the client: answers each form with the next decision."""

    decisions: list[str]
    asked: list[str] = field(default_factory=list)
    # Runs while a form is open (before the answer), e.g. the model trying to approve.
    meanwhile: Callable[[str], Any] | None = None

    async def __call__(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params.message)
        if self.meanwhile is not None:
            await self.meanwhile(params.message)
        decision = self.decisions.pop(0)
        if decision == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": decision})


def approval_id_in(message: str) -> str:
    return next(line.split()[-1] for line in message.splitlines() if line.startswith("Approval:"))


@pytest.fixture(scope="module")
def elicit_dirs(tmp_path_factory: pytest.TempPathFactory, harness: Any) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("elicit")
    data = root / "data"
    demo = server_commands(data)
    config = harness.write_config(
        root,
        {"docs": demo["docs"], "crm": demo["crm"]},
        gateway={"progress_interval_s": 0.05},
    )
    return config, data


@pytest.fixture(scope="module", params=["stdio", "http"])
async def target(
    request: pytest.FixtureRequest, elicit_dirs: tuple[Path, Path], harness: Any
) -> AsyncIterator[Callable[[], Any]]:
    """A factory of transports to one gateway (HTTP) or to new gateway processes (stdio)."""
    config, _ = elicit_dirs
    if request.param == "stdio":
        yield lambda: harness.stdio_target(config)
        return
    http = harness.HTTPGateway(config, config.parent / "gateway-http.log").start()
    try:
        yield lambda: harness.http_target(http.url, harness.bearer(harness.MAIN))
    finally:
        left = http.stop()
        assert not left, f"the gateway left processes behind: {sorted(left)}"


def stage_of(data: Path) -> str:
    with sqlite3.connect(data / "crm.sqlite") as db:
        (stage,) = db.execute("SELECT notes FROM leads WHERE id = ?", (ACME_LEAD_ID,)).fetchone()
    return str(stage)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_person_allows_once_and_the_model_sees_only_the_outcome(
    target: Callable[[], Any], elicit_dirs: tuple[Path, Path], harness: Any, mode: str
) -> None:
    person = Person(["allow_call"])
    async with harness.client_for(target(), mode=mode, elicitation_callback=person) as client:
        result = await client.call_tool(
            "execute", {"code": update(f"Won {mode}"), "session": "new"}
        )
    data = harness.structured(result)
    assert data["status"] == "ok" and data["stdout"] == "updated\n", harness.text_of(result)
    assert "approval" not in data
    assert len(person.asked) == 1 and "crm.update_lead" in person.asked[0]
    assert f"Won {mode}" in person.asked[0]  # the arguments are in the message
    assert stage_of(elicit_dirs[1]) == f"Won {mode}"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_person_denies_and_the_call_never_runs(
    target: Callable[[], Any], elicit_dirs: tuple[Path, Path], harness: Any, mode: str
) -> None:
    before = stage_of(elicit_dirs[1])
    person = Person(["deny"] if mode == "auto" else ["decline"])
    async with harness.client_for(target(), mode=mode, elicitation_callback=person) as client:
        result = await client.call_tool("execute", {"code": update("Never"), "session": "new"})
    data = harness.structured(result)
    assert data["status"] == "ok" and data["stdout"].startswith("denied:"), harness.text_of(result)
    assert len(person.asked) == 1
    assert stage_of(elicit_dirs[1]) == before


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_allowing_the_tool_asks_once_for_the_rest_of_the_session(
    target: Callable[[], Any], elicit_dirs: tuple[Path, Path], harness: Any, mode: str
) -> None:
    person = Person(["allow_tool"])
    code = update(f"First {mode}") + update(f"Second {mode}")
    async with harness.client_for(target(), mode=mode, elicitation_callback=person) as client:
        first = harness.structured(
            await client.call_tool("execute", {"code": code, "session": "new"})
        )
        assert first["stdout"] == "updated\nupdated\n", first
        again = await client.call_tool(
            "execute", {"code": update(f"Third {mode}"), "session": first["session"]}
        )
    assert harness.structured(again)["stdout"] == "updated\n"
    assert len(person.asked) == 1  # the later calls to the same tool were not asked
    assert stage_of(elicit_dirs[1]) == f"Third {mode}"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_model_cannot_approve_while_the_person_decides(
    target: Callable[[], Any], elicit_dirs: tuple[Path, Path], harness: Any, mode: str
) -> None:
    before = stage_of(elicit_dirs[1])
    refusals: list[types.CallToolResult] = []
    clients: list[Any] = []

    async def model_approves(message: str) -> None:
        # The model (any tool call of the same owner) tries to answer the pending approval.
        answer = {"approval": approval_id_in(message), "allow": True}
        refusals.append(await clients[0].call_tool("approve", answer))

    person = Person(["deny"], meanwhile=model_approves)
    async with harness.client_for(target(), mode=mode, elicitation_callback=person) as client:
        clients.append(client)
        result = await client.call_tool(
            "execute", {"code": update("Self-approved"), "session": "new"}
        )
    assert harness.structured(result)["stdout"].startswith("denied:")
    assert len(refusals) == 1 and refusals[0].is_error
    assert "being decided by the user" in harness.text_of(refusals[0])
    assert stage_of(elicit_dirs[1]) == before


async def test_progress_flows_while_the_person_decides(
    target: Callable[[], Any], harness: Any
) -> None:
    """A client with a back-channel (2025) keeps getting progress while the form is open."""
    waiting = anyio.Event()
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")
        if "for the user to decide crm.update_lead" in (message or ""):
            waiting.set()

    async def answer_after_progress(message: str) -> None:
        with anyio.fail_after(30):
            await waiting.wait()

    person = Person(["allow_call"], meanwhile=answer_after_progress)
    async with harness.client_for(target(), mode="legacy", elicitation_callback=person) as client:
        result = await client.call_tool(
            "execute",
            {"code": update("Progressed"), "session": "new"},
            progress_callback=on_progress,
        )
    assert harness.structured(result)["stdout"] == "updated\n"
    assert any("for the user to decide" in message for message in messages)


async def test_a_client_without_elicitation_still_gets_approval_required(
    target: Callable[[], Any], harness: Any
) -> None:
    async with harness.client_for(target()) as client:
        paused = harness.structured(
            await client.call_tool("execute", {"code": update("Tool"), "session": "new"})
        )
        assert paused["status"] == "approval_required"
        done = await client.call_tool(
            "approve", {"approval": paused["approval"]["id"], "allow": True}
        )
    assert harness.structured(done)["stdout"] == "updated\n"


async def test_the_approve_tool_asks_clients_to_confirm_it(
    target: Callable[[], Any], harness: Any
) -> None:
    async with harness.client_for(target()) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    annotations = tools["approve"].annotations
    assert annotations is not None and annotations.destructive_hint is True
    assert annotations.read_only_hint is False and annotations.idempotent_hint is False


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_form_shows_what_the_code_printed_before_the_call(
    target: Callable[[], Any], harness: Any, mode: str
) -> None:
    person = Person(["deny"])
    code = "print('about to change 1 of 37 open leads')\n" + update(f"Printed {mode}")
    async with harness.client_for(target(), mode=mode, elicitation_callback=person) as client:
        result = await client.call_tool("execute", {"code": code, "session": "new"})
    assert harness.structured(result)["stdout"].startswith("about to change"), result
    (message,) = person.asked
    assert "The code printed before this call:\nabout to change 1 of 37 open leads" in message

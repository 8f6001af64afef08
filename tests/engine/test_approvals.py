"""An approval pauses the execution; answering resumes it, and the side effect happens once."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from codemode.bridge.host import BridgeHost, ToolAccess
from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.engine.approvals import ApprovalBroker, PendingApproval, SessionApprovalGate
from codemode.errors import ApprovalMismatchError, SessionError
from codemode.policy import Budget, Policy, PolicyInvoker, PolicySettings
from codemode.policy.approval import ApprovalDecision, ApprovalRequest
from codemode.policy.grants import ApprovalAnswer
from codemode.testing import RecordingInvoker

pytestmark = pytest.mark.anyio

CODE = (
    "from servers import shop\n"
    "print('items:', shop.list_items())\n"
    "try:\n"
    "    order = shop.place_order(item='pear', quantity=2)\n"
    "    print('ordered', order['number'])\n"
    "except Exception as error:\n"
    "    print('refused:', error)\n"
)


ASK_BEFORE_ORDERS = {
    "rules": [{"tools": ["shop.place_order"], "action": "ask", "reason": "orders cost money"}]
}


@pytest.fixture
async def asking(shop: Any, engine_config: CodemodeConfig) -> AsyncIterator[Codemode]:
    """An engine whose policy asks a human before ``shop.place_order``."""
    policy = PolicySettings.from_mapping(ASK_BEFORE_ORDERS, "t")
    config = engine_config.model_copy(update={"policy": policy})
    catalog = Catalog([PythonConnector("shop", shop.functions())])
    async with Codemode(config, catalog=catalog, semantic=False) as engine:
        yield engine


async def test_approved_call_resumes_the_same_execution_once(asking: Codemode, shop):
    paused = await asking.execute(CODE)
    assert paused.status == "approval_required"
    approval = paused.to_dict()["approval"]
    assert approval["tool"] == "shop.place_order"
    assert approval["arguments"] == {"item": "pear", "quantity": 2}
    assert "orders cost money" in approval["reason"]
    assert shop.orders == []  # nothing happened yet
    assert approval["id"] in paused.render_text()

    with pytest.raises(SessionError, match="waiting for an approval"):
        await asking.execute("print(1)", session=paused.session)

    done = await asking.approve(approval["id"], True)
    assert done.status == "ok"
    assert done.stdout == "items: ['apple', 'pear']\nordered 1\n"
    assert done.session == paused.session
    assert shop.orders == [{"item": "pear", "quantity": 2, "number": 1}]
    with pytest.raises(SessionError, match="no pending approval"):
        await asking.approve(approval["id"], True)
    after = await asking.execute("print(order['item'])", session=done.session)
    assert after.stdout == "pear\n"


async def test_denied_call_raises_tool_error_in_the_code(asking: Codemode, shop):
    paused = await asking.execute(CODE)
    done = await asking.approve(paused.to_dict()["approval"]["id"], False)
    assert done.status == "ok"
    assert "refused: shop.place_order was not run: the user denied" in done.stdout
    assert shop.orders == []


async def test_a_typed_request_and_decision_round_trip_through_the_engine(asking: Codemode, shop):
    paused = await asking.execute(CODE, owner="alice")
    request = paused.approval
    assert isinstance(request, ApprovalRequest)
    assert (request.server, request.tool) == ("shop", "shop.place_order")
    assert request.arguments == {"item": "pear", "quantity": 2}
    assert request.digest.startswith("sha256:") and request.chars == len(
        '{"item":"pear","quantity":2}'
    )
    assert paused.to_dict()["approval"] == request.to_dict()
    assert ApprovalRequest.from_dict(request.to_dict()) == request
    # A decision names its request, quotes its digest and says who decided.
    decision = ApprovalDecision.answering(request, ApprovalAnswer(True, "tool"), "alice")
    assert (decision.approval_id, decision.digest) == (request.id, request.digest)
    with pytest.raises(SessionError, match="no pending approval"):
        await asking.decide(replace(decision, decided_by="bob"))  # another owner's
    stale = replace(decision, digest="sha256:" + "0" * 64)
    with pytest.raises(ApprovalMismatchError):
        await asking.decide(stale)
    done = await asking.decide(decision)
    assert done.status == "ok" and shop.orders == [{"item": "pear", "quantity": 2, "number": 1}]
    assert done.grants is not None and done.grants[0]["target"] == "shop.place_order"
    denial = ApprovalDecision.answering(request, ApprovalAnswer(False, "tool"))
    assert (denial.allow, denial.remember, denial.digest) == (False, "call", None)


async def test_waiting_for_approval_does_not_count_against_the_time_limit(asking: Codemode, shop):
    import anyio

    paused = await asking.execute(CODE, timeout_s=1.0)
    await anyio.sleep(1.5)  # a human thinking: longer than the execution may run
    done = await asking.approve(paused.to_dict()["approval"]["id"], True)
    assert done.status == "ok", done.render_text()
    assert len(shop.orders) == 1


async def test_closing_a_paused_session_denies_and_ends_it(asking: Codemode, shop):
    paused = await asking.execute(CODE)
    assert await asking.close_session(paused.session)
    assert shop.orders == []
    with pytest.raises(SessionError):
        await asking.approve(paused.to_dict()["approval"]["id"], True)


async def test_an_unknown_handle_is_its_own_error(asking: Codemode):
    from codemode.errors import UnknownSessionError

    with pytest.raises(UnknownSessionError, match="unknown or expired session"):
        await asking.execute("print(1)", session="s_not-a-real-handle")


async def test_a_legacy_client_whose_session_expired_gets_a_new_one(asking: Codemode):
    from mcp import Client

    from codemode.gateway.server import build_server

    async with Client(build_server(asking), mode="legacy") as client:
        first = await client.call_tool("execute", {"code": "x = 1"})
        handle = first.structured_content["session"]
        assert await asking.close_session(handle)  # as if it had expired
        again = await client.call_tool("execute", {"code": "print('x' in globals())"})
    assert again.structured_content["status"] == "ok", again.content[0].text
    assert again.structured_content["stdout"] == "False\n"
    assert again.structured_content["session"] != handle


def test_a_wait_for_a_human_moves_the_deadline_once() -> None:
    """Regression: the policy wrapper and the broker both paused the clock, so a wait of W
    gave the code 2W more time. The deadline must move by the wait, not twice it."""
    broker = ApprovalBroker()
    policy = Policy(PolicySettings.from_mapping(ASK_BEFORE_ORDERS, "t"), lambda s, t: None)
    approver = SessionApprovalGate(broker, "s1", None)
    invoker = PolicyInvoker(
        RecordingInvoker(default="ok"), policy, approver=approver, budget=Budget()
    )
    host = BridgeHost(1, ToolAccess(invoker), deadline=time.monotonic() + 60)
    asked = threading.Event()
    waiting: list[PendingApproval] = []

    def notice(pending: PendingApproval) -> None:
        waiting.append(pending)
        asked.set()

    def human() -> None:
        assert asked.wait(10)
        # Thinking time: a bounded wait on an event nobody sets.
        threading.Event().wait(0.4)
        broker.answer(waiting[0].id, True, None)

    broker.listen("s1", notice)
    person = threading.Thread(target=human)
    person.start()
    before = host.deadline
    started = time.monotonic()
    reply = host.handle(
        {"op": "call", "id": 1, "exec": 1, "server": "shop", "tool": "place_order", "args": {}}
    )
    elapsed = time.monotonic() - started
    person.join(10)
    assert reply["ok"] is True, reply
    moved = host.deadline - before
    # At least the human's 0.4 s, and never more than the whole call took (2x before).
    assert 0.4 <= moved <= elapsed


async def test_output_printed_before_the_pause_is_shown_with_the_approval(asking: Codemode):
    code = "from servers import shop\nprint('3 orders to place')\nshop.place_order(item='pear', quantity=2)\n"
    paused = await asking.execute(code)
    assert paused.status == "approval_required"
    assert paused.stdout == "3 orders to place\n"
    assert "stdout:\n3 orders to place\napproval needed: shop.place_order" in paused.render_text()
    assert paused.to_structured()["stdout"] == "3 orders to place\n"
    done = await asking.approve(paused.to_dict()["approval"]["id"], True)
    assert done.stdout == "3 orders to place\n"

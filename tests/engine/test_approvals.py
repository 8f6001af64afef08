"""An approval pauses the execution; answering resumes it, and the side effect happens once."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.bridge.host import Approver, ToolInvoker
from codemode.engine import Codemode
from codemode.engine.approvals import SessionApprover
from codemode.engine.registry import SessionRecord
from codemode.errors import SessionError, ToolError
from codemode.tools import ToolCall

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


class AskBeforeOrders:
    """A stand-in for the policy wrapper: asks the approver before place_order."""

    def __init__(self, inner: ToolInvoker, approver: Approver) -> None:
        self.inner = inner
        self.approver = approver

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        if call.tool == "place_order" and not self.approver.request(
            call, reason="orders cost money"
        ):
            raise ToolError("the user declined shop.place_order")
        return self.inner.invoke(call, timeout_s=timeout_s)


@pytest.fixture
def asking(engine: Codemode, monkeypatch: pytest.MonkeyPatch) -> Codemode:
    base = engine._invoker_for

    def chain(record: SessionRecord) -> ToolInvoker:
        approver = SessionApprover(engine.approvals, record.handle, None)
        return AskBeforeOrders(base(record), approver)

    monkeypatch.setattr(engine, "_invoker_for", chain)
    return engine


async def test_approved_call_resumes_the_same_execution_once(asking: Codemode, shop):
    paused = await asking.execute(CODE)
    assert paused.status == "approval_required"
    approval = paused.to_dict()["approval"]
    assert approval["tool"] == "shop.place_order"
    assert approval["arguments"] == {"item": "pear", "quantity": 2}
    assert approval["reason"] == "orders cost money"
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
    assert "refused: the user declined shop.place_order" in done.stdout
    assert shop.orders == []


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

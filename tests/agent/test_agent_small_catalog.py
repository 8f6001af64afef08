"""Small catalogs: the agent's prompt lists every function (no search round needed), a large
one does not, and approvals of many calls of one tool read as one line."""

from __future__ import annotations

import pytest

from codemode.agent import Agent, Approval, ScriptedModel
from codemode.agent.feedback import render_execution
from codemode.agent.record import ApprovalRecord
from codemode.search.listing import SMALL_CATALOG_TOKENS, small_catalog_listing
from codemode.tokens import count_tokens
from codemode.tools import ToolSpec

pytestmark = pytest.mark.anyio


def _spec(server: str, name: str, description: str) -> ToolSpec:
    schema = {
        "type": "object",
        "properties": {"item_id": {"type": "string"}},
        "required": ["item_id"],
    }
    return ToolSpec(server=server, name=name, description=description, input_schema=schema)


def test_a_small_catalog_is_listed_whole_within_its_budget():
    specs = [_spec("shop", f"tool_{i}", f"Does thing number {i}.") for i in range(5)]
    listing = small_catalog_listing(specs)
    assert listing is not None
    assert listing.startswith("from servers import shop")
    for i in range(5):
        assert f"shop.tool_{i}(item_id: str" in listing and f"Does thing number {i}." in listing
    assert count_tokens(listing) <= SMALL_CATALOG_TOKENS


def test_a_catalog_over_the_budget_is_not_listed():
    words = "Fetch the record and everything about its owner, history and billing."
    specs = [_spec("big", f"operation_{i}", words) for i in range(30)]
    assert small_catalog_listing(specs) is None
    assert small_catalog_listing(specs[:2], max_tokens=10) is None
    assert small_catalog_listing([]) is None


async def test_the_agent_prompt_lists_a_small_catalog_and_the_model_can_skip_search(engine, shop):
    def approve(approval: Approval) -> bool:
        return True

    code = "from servers import shop\nprint(shop.place_order(item='pear', quantity=1))"
    model = ScriptedModel([{"execute": code}, {"answer": "ordered"}])
    record = await Agent(engine, model, approve=approve).run("Order a pear")
    assert record.status == "done" and len(record.rounds) == 2
    system = model.requests[0].system
    assert "Use search to find" not in system
    assert [tool.name for tool in model.requests[0].tools] == ["execute"]
    listed = system.split("The functions (all of them):\n", 1)[1]
    assert "shop.place_order(item: str, quantity: int)" in listed
    assert "shop.list_items()" in listed and "shop.broken_price(item: str)" in listed


def test_approvals_of_many_calls_of_one_tool_read_as_one_line():
    decisions = [ApprovalRecord("ops.create_order", {"n": i}, "asks", True) for i in range(4)]
    decisions += [
        ApprovalRecord("ops.list_stock", {}, "asks", True),
        ApprovalRecord("ops.delete_all", {}, "asks", False),
    ]
    text = render_execution({"status": "ok", "stdout": "done\n"}, decisions)
    assert "approval: the user allowed ops.create_order (x4), ops.list_stock" in text
    assert "approval: the user denied ops.delete_all" in text
    assert text.count("approval:") == 2

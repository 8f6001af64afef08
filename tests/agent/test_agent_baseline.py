"""The tool-calling baseline in the same harness: every definition in every request, every
result whole in the context, the same policy and approvals."""

from __future__ import annotations

import json

import pytest

from codemode.agent import Approval, ScriptedModel, ToolCallingAgent
from codemode.errors import ModelConfigError

pytestmark = pytest.mark.anyio


async def test_every_tool_is_offered_and_every_result_comes_back_whole(engine):
    model = ScriptedModel(
        [{"call": "shop__list_items", "arguments": {}}, {"answer": "apple and pear"}]
    )
    record = await ToolCallingAgent(engine, model).run("What is for sale?")
    assert record.status == "done" and record.paradigm == "tool-calling"
    names = [tool.name for tool in model.requests[0].tools]
    assert names == ["shop__list_items", "shop__place_order", "shop__broken_price"]
    result = model.requests[1].messages[-1]
    assert result.role == "tool"
    assert json.loads(result.text) == [
        {"name": "apple", "price_cents": 40},
        {"name": "pear", "price_cents": 55},
    ]
    step = record.rounds[0].steps[0]
    assert (step.kind, step.tool, step.arguments) == ("tool", "shop.list_items", {})


async def test_tool_errors_and_unknown_tools_go_back_to_the_model(engine):
    model = ScriptedModel(
        [
            {"call": "shop__broken_price", "arguments": {"item": "apple"}},
            {"call": "crm__delete_everything", "arguments": {}},
            {"answer": "could not"},
        ]
    )
    record = await ToolCallingAgent(engine, model).run("price?")
    first, second = (r.steps[0] for r in record.rounds[:2])
    assert "price service unavailable" in first.feedback and first.problem
    assert second.kind == "malformed" and "no tool 'crm__delete_everything'" in second.feedback
    assert model.requests[1].messages[-1].is_error


@pytest.mark.parametrize("allow", [True, False])
async def test_the_same_approvals_apply(engine, shop, allow):
    asked: list[Approval] = []

    def approve(approval: Approval) -> bool:
        asked.append(approval)
        return allow

    model = ScriptedModel(
        [{"call": "shop__place_order", "arguments": {"item": "pear", "quantity": 1}}, "done"]
    )
    record = await ToolCallingAgent(engine, model, approve=approve).run("order a pear")
    assert [a.tool for a in asked] == ["shop.place_order"]
    assert len(shop.orders) == (1 if allow else 0)
    feedback = record.rounds[0].steps[0].feedback
    assert ("denied" in feedback) is not allow


async def test_a_model_without_tool_calling_cannot_be_the_baseline(engine):
    with pytest.raises(ModelConfigError, match="no native tool calling"):
        ToolCallingAgent(engine, ScriptedModel([], supports_tools=False))

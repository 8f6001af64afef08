"""The codemode agent's loop over a real engine and sandbox, driven by a scripted model."""

from __future__ import annotations

import pytest

from codemode.agent import Agent, Approval, ScriptedModel
from codemode.agent.agent import system_prompt
from codemode.agent.formats import make_format
from codemode.agent.providers.base import ModelReply, ModelRequest
from codemode.errors import ContextLengthError, ModelConfigError, ModelError
from codemode.tokens import count_tokens

pytestmark = pytest.mark.anyio


async def test_plan_search_execute_fix_and_answer(engine):
    model = ScriptedModel(
        [
            {"thoughts": "Find the shop's functions first.", "search": "list items for sale"},
            {
                "thoughts": "Plan: list items, total their prices.",
                "execute": "from servers import shop\n"
                "items = shop.list_items()\n"
                "print(sum(i['price'] for i in items))",
            },
            {"execute": "total = sum(i['price_cents'] for i in items)\nprint(total)"},
            {"answer": "The items cost 95 cents together."},
        ]
    )
    record = await Agent(engine, model).run("What do all items cost together?")
    assert record.status == "done"
    assert record.answer == "The items cost 95 cents together."
    kinds = [step.kind for r in record.rounds for step in r.steps]
    assert kinds == ["search", "execute", "execute", "answer"]
    search, failed, fixed = (r.steps[0] for r in record.rounds[:3])
    assert "shop.list_items" in search.feedback
    assert failed.result["status"] == "error"
    assert "KeyError" in failed.feedback and "line 3" in failed.feedback
    # The variable from round 2 survived into round 3: one session for the run.
    assert fixed.result["stdout"] == "95\n"
    assert record.rounds[1].thoughts == "Plan: list items, total their prices."
    # What the model read next is exactly the structured result.
    third_request = model.requests[2]
    assert third_request.messages[-1].role == "tool"
    assert third_request.messages[-1].text == failed.feedback
    assert all(r.tokens_in > 0 and r.tokens_out > 0 for r in record.rounds)


def test_the_prompt_for_a_catalog_to_search_asks_for_a_plan_and_offers_two_tools():
    # A catalog too big to list (the shop fixture is small enough: see the listed test below).
    tools = make_format("tools").for_catalog(listed=False)
    system = system_prompt(tools, ["crm", "docs"], 3)
    assert "Plan first" in system and "small functions" in system
    assert "at most 3 rounds" in system and "Use search to find" in system
    assert [tool.name for tool in tools.tools()] == ["search", "execute"]
    assert tools.tools()[1].input_schema["required"] == ["code"]


async def test_the_prompt_for_a_listed_catalog_is_short_and_offers_execute_only(engine):
    model = ScriptedModel([{"answer": "nothing to do"}])
    await Agent(engine, model, max_rounds=3).run("Say hi")
    request = model.requests[0]
    assert "Plan in a line" in request.system and "at most 3 rounds" in request.system.lower()
    assert "help(f)" in request.system and "FINAL ANSWER:" in request.system
    assert [tool.name for tool in request.tools] == ["execute"]
    assert request.tools[0].input_schema["required"] == ["code"]
    # Cheaper than the guide for a catalog to search, listing included.
    searched = system_prompt(make_format("tools"), ["shop"], 3)
    assert count_tokens(request.system) + 60 < count_tokens(searched) + count_tokens(
        request.system.split("The functions (all of them):\n", 1)[1]
    )


async def test_help_on_a_listed_function_prints_its_docs(engine):
    code = "from servers import shop\nhelp(shop.place_order)"
    model = ScriptedModel([{"execute": code}, {"answer": "read"}])
    record = await Agent(engine, model).run("What does place_order do?")
    stdout = record.rounds[0].steps[0].result["stdout"]
    assert "place_order(" in stdout and "Place an order" in stdout


async def test_a_final_answer_line_without_a_tool_call_ends_the_run_with_that_answer(engine):
    model = ScriptedModel(["Six sevens.\nFINAL ANSWER: It is 42."])
    record = await Agent(engine, model).run("What is 6*7?")
    assert (record.status, record.answer, len(record.rounds)) == ("done", "It is 42.", 1)
    assert record.rounds[0].thoughts == "Six sevens."


async def test_the_round_cap_escalates_with_a_short_summary(engine):
    failing = {
        "thoughts": "Ask the price service.",
        "execute": "from servers import shop\nprint(shop.broken_price(item='apple'))",
    }
    model = ScriptedModel([failing] * 10)
    record = await Agent(engine, model, max_rounds=3).run("Find the price of an apple")
    assert record.status == "escalated"
    assert len(record.rounds) == 3 and len(model.requests) == 3
    assert record.answer is None
    summary = record.summary or ""
    assert "Stopped after 3 rounds" in summary
    assert "round 3: ran code (error, ToolError)" in summary
    assert "Failed last: round 3: ToolError" in summary and "price service unavailable" in summary
    assert "Needs:" in summary


async def test_default_cap_is_eight_rounds(engine):
    model = ScriptedModel([{"execute": "print(1)"}] * 20)
    record = await Agent(engine, model).run("loop")
    assert (record.status, len(record.rounds), record.max_rounds) == ("escalated", 8, 8)


ORDER = "from servers import shop\nprint(shop.place_order(item='pear', quantity=2))"


async def test_an_allowed_approval_resumes_the_execution_and_the_call_happens_once(engine, shop):
    asked: list[Approval] = []

    def approve(approval: Approval) -> bool:
        asked.append(approval)
        return True

    model = ScriptedModel([{"execute": ORDER}, {"answer": "ordered"}])
    record = await Agent(engine, model, approve=approve).run("Order two pears")
    assert record.status == "done"
    assert [a.tool for a in asked] == ["shop.place_order"]
    assert asked[0].arguments == {"item": "pear", "quantity": 2}
    assert "orders cost money" in asked[0].reason
    assert shop.orders == [{"item": "pear", "quantity": 2, "number": 1}]
    step = record.rounds[0].steps[0]
    assert step.result["status"] == "ok"
    assert [d.allowed for d in step.approvals] == [True]
    assert "approval: the user allowed shop.place_order" in step.feedback


async def test_a_denied_approval_reaches_the_model_as_a_tool_error(engine, shop):
    async def approve(approval: Approval) -> bool:  # an async callback is awaited
        return False

    model = ScriptedModel([{"execute": ORDER}, {"answer": "the user said no"}])
    record = await Agent(engine, model, approve=approve).run("Order two pears")
    assert shop.orders == []
    step = record.rounds[0].steps[0]
    assert step.result["status"] == "error"
    assert step.result["error"]["type"] == "ToolError"
    assert "denied the approval" in step.feedback
    assert "approval: the user denied shop.place_order" in step.feedback
    assert model.requests[1].messages[-1].is_error
    assert record.status == "done"


async def test_without_a_callback_approvals_are_denied(engine, shop):
    model = ScriptedModel([{"execute": ORDER}, {"answer": "could not"}])
    record = await Agent(engine, model).run("Order two pears")
    assert shop.orders == [] and record.rounds[0].steps[0].approvals[0].allowed is False


async def test_one_session_per_run_closed_at_the_end(engine):
    model = ScriptedModel([{"execute": "x = 41"}, {"execute": "print(x + 1)"}, {"answer": "42"}])
    record = await Agent(engine, model).run("add one")
    assert record.rounds[1].steps[0].result["stdout"] == "42\n"
    assert record.session is not None
    assert engine.registry is not None and len(engine.registry) == 0
    again = ScriptedModel([{"execute": "print(x)"}, {"answer": "gone"}])
    second = await Agent(engine, again).run("print x")
    assert second.rounds[0].steps[0].result["error"]["type"] == "NameError"


@pytest.mark.parametrize("output_format", ["json", "fenced"])
async def test_text_formats_run_the_same_loop(engine, output_format):
    answers = {
        "json": ['{"thoughts": "t", "code": "print(6*7)"}', '{"answer": "42"}'],
        "fenced": ["Plan.\n```python\nprint(6*7)\n```", "FINAL ANSWER: 42"],
    }[output_format]
    model = ScriptedModel(answers, supports_tools=False)
    record = await Agent(engine, model, output_format=output_format).run("6*7?")
    assert record.output_format == output_format
    assert model.requests[0].tools == ()
    assert record.rounds[0].steps[0].result["stdout"] == "42\n"
    assert model.requests[1].messages[-1].role == "user"  # results come back as user turns
    assert (record.status, record.answer) == ("done", "42")


async def test_a_malformed_answer_costs_a_round_and_gets_a_one_line_correction(engine):
    model = ScriptedModel(["I will think about it.", "FINAL ANSWER: done"], supports_tools=False)
    record = await Agent(engine, model, output_format="fenced").run("do it")
    assert record.status == "done" and len(record.rounds) == 2
    step = record.rounds[0].steps[0]
    assert step.kind == "malformed"
    correction = model.requests[1].messages[-1].text
    assert correction.count("\n") == 0 and "```python" in correction


async def test_a_provider_failure_ends_the_run_as_failed(engine):
    def broken(request: ModelRequest) -> ModelReply:
        raise ModelError("the model API is down")

    record = await Agent(engine, ScriptedModel(broken)).run("anything")
    assert record.status == "failed" and "the model API is down" in (record.error or "")


async def test_a_context_length_error_shrinks_the_conversation_and_retries(engine):
    """A model whose window holds about 1,000 characters of conversation: the loop shortens
    the oldest results (never the task) and asks again, without spending a round."""
    seen: list[ModelRequest] = []

    def small_window(request: ModelRequest) -> dict:
        if sum(len(m.text) for m in request.messages) > 1_000:
            raise ContextLengthError("too long")
        seen.append(request)
        if len(seen) < 4:
            return {"execute": f"print('{len(seen)}' * 600)"}
        return {"answer": "done"}

    record = await Agent(engine, ScriptedModel(small_window)).run("print a lot, 3 times")
    assert record.status == "done" and len(record.rounds) == 4
    assert record.context_trims > 0
    last = seen[-1].messages
    assert last[0].kind == "task" and last[0].text == "print a lot, 3 times"
    assert "3" * 600 in last[-1].text  # the newest result stays whole
    # Older results were shortened or their rounds dropped: 3 rounds of 2 messages do not fit.
    shortened = [m for m in last if "[shortened to save context]" in m.text]
    assert shortened or len(last) < 7


async def test_an_unknown_model_or_refused_key_is_raised_not_recorded(engine):
    def refused(request: ModelRequest) -> ModelReply:
        raise ModelConfigError("the model API refused the API key (HTTP 401)")

    with pytest.raises(ModelConfigError, match="refused the API key"):
        await Agent(engine, ScriptedModel(refused)).run("anything")
    assert engine.registry is not None and len(engine.registry) == 0  # nothing left open


async def test_a_provider_bug_fails_the_run_instead_of_crashing_it(engine):
    def buggy(request: ModelRequest) -> ModelReply:
        raise KeyError("choices")

    record = await Agent(engine, ScriptedModel(buggy)).run("anything")
    assert record.status == "failed" and "KeyError" in (record.error or "")


async def test_an_answer_remembered_for_the_tool_is_asked_once_and_carries_the_view(engine, shop):
    from codemode.policy.grants import ApprovalAnswer

    asked: list[Approval] = []

    def approve(approval: Approval) -> ApprovalAnswer:
        asked.append(approval)
        return ApprovalAnswer(True, "tool")

    three = (
        "from servers import shop\n"
        "for n in (1, 2, 3):\n"
        "    shop.place_order(item='pear', quantity=n)\n"
        "print('ordered')"
    )
    model = ScriptedModel([{"execute": three}, {"answer": "ordered"}])
    record = await Agent(engine, model, approve=approve).run("Order pears three times")
    assert record.status == "done"
    assert len(asked) == 1 and len(shop.orders) == 3
    assert asked[0].digest.startswith("sha256:")  # the whole approval view, for a terminal

"""Re-ranking by the client's model: picks move up, the prompt keeps its budget, failures are
harmless. The model is a fake here (no model can run in tests); it stands for MCP sampling."""

import anyio
import pytest

from codemode.search.base import Hit
from codemode.search.sampling import build_prompt, parse_choice, rerank_with_model
from codemode.tokens import count_tokens


def hits(n):
    return [
        Hit(
            "shop",
            f"tool{i}",
            "shop",
            f"tool_{i}",
            1.0 - i / 100,
            f"Does thing number {i}. " * 8,
            "f()",
        )
        for i in range(1, n + 1)
    ]


class FakeModel:
    """Answers with a fixed text and records what it was asked."""

    def __init__(self, answer):
        self.answer = answer
        self.prompts = []

    async def __call__(self, prompt, max_tokens):
        self.prompts.append((prompt, max_tokens))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def rerank(query, items, model, **options):
    return anyio.run(lambda: rerank_with_model(query, items, model, **options))


def test_the_models_picks_come_first_in_its_order():
    items = hits(25)
    model = FakeModel("7, 3 and also 7 and 99")
    ranked = rerank("do thing seven", items, model, top=20)
    assert [h.tool for h in ranked[:2]] == ["tool7", "tool3"]
    assert sorted(h.tool for h in ranked) == sorted(h.tool for h in items)
    prompt, max_tokens = model.prompts[0]
    assert "Task: do thing seven" in prompt
    assert "20. shop.tool_20" in prompt and "21. " not in prompt
    assert max_tokens == 30


@pytest.mark.parametrize("answer", ["none of them", "", RuntimeError("sampling not supported")])
def test_a_useless_or_failed_answer_keeps_the_order(answer):
    items = hits(5)
    assert rerank("anything", items, FakeModel(answer)) == items


def test_a_slow_model_is_given_up_on():
    class Slow:
        async def __call__(self, prompt, max_tokens):
            await anyio.sleep_forever()

    items = hits(3)
    assert rerank("anything", items, Slow(), timeout_s=0.05) == items


def test_the_prompt_stays_within_its_token_budget():
    items = hits(20)
    for budget in (1200, 400, 150):
        prompt, count = build_prompt("a task", items, budget)
        assert count_tokens(prompt) <= budget
        assert count >= 2
    assert (
        build_prompt("a task", items, 400)[1] < 20
        or "Does thing" not in build_prompt("a task", items, 400)[0]
    )
    assert build_prompt("a task", items, 10) == ("", 0)


def test_parse_choice_keeps_valid_first_mentions():
    assert parse_choice("3, 1, 3, 0, 12", 10) == [3, 1]
    assert parse_choice("no numbers", 10) == []

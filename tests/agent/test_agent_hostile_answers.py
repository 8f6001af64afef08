"""200 malformed or hostile model answers: each costs one clean round (a step with feedback),
the loop never crashes and always ends within max_rounds. Hostile code runs only in a sandbox
whose isolation was proven first."""

from __future__ import annotations

import json

import pytest

from codemode.agent import Agent, ScriptedModel
from codemode.agent.parsing import MAX_REPLY_CHARS
from codemode.agent.providers.base import ModelReply, ToolCallRequest

pytestmark = [pytest.mark.anyio, pytest.mark.hostile]

HOSTILE_CODE = [
    "while True:\n    pass",  # loops forever: the execution times out
    "print('x' * 5_000_000)",  # floods stdout
    "import sys\nfor _ in range(200_000):\n    sys.stderr.write('noise ' * 10 + '\\n')",
    "from servers import shop\nshop.broken_price(item='apple')",  # raises in a tool
    "from servers import shop\nshop.place_order(item='x', quantity='many')",  # bad arguments
    "1 / 0",
    "raise SystemExit('bye')",
    "import os\nos._exit(3)",
    "data = bytearray(3 * 1024 ** 3)",  # beyond the memory limit
    "def f(n):\n    return f(n + 1)\nf(0)",  # RecursionError
    "print('\\x00\\udcff' * 1000)",
    "import time\ntime.sleep(60)",
    "from servers import nothere",
    "exec('x = ' + '(' * 200 + ')' * 200)",
]

BROKEN_TEXT = [
    "",
    "   ",
    "I will do it now.",
    "{",
    '{"thoughts": "no code"}',
    '{"code": 123}',
    '{"code": ""}',
    '{"code": null, "answer": null}',
    "[" * 10_000 + "]" * 10_000,
    "{" * 50_000,
    '"' * 1000,
    "x" * (MAX_REPLY_CHARS + 10),
    "```bash\nrm -rf /\n```",
    "```python\n```",
    "\x00\x01\x02 binary \udcff garbage",
    '{"thoughts": "t", "code": "def broken(:\\n    pass"}',
    "```python\ndef broken(:\n    pass\n```",
    json.dumps({"thoughts": "t", "code": {"nested": "object"}}),
    "```search\n\n```",
]


def json_answers(count: int) -> list[str]:
    pool = [json.dumps({"thoughts": "try", "code": code}) for code in HOSTILE_CODE] + BROKEN_TEXT
    return [pool[i % len(pool)] for i in range(count)]


def fenced_answers(count: int) -> list[str]:
    pool = [f"Plan.\n```python\n{code}\n```" for code in HOSTILE_CODE] + BROKEN_TEXT
    return [pool[i % len(pool)] for i in range(count)]


def tool_answers(count: int) -> list[ModelReply]:
    def call(name: str, arguments: object, raw: str | None = None) -> ModelReply:
        args = arguments if isinstance(arguments, dict) else None
        return ModelReply("", (ToolCallRequest("c", name, args, raw),))

    pool = [call("execute", {"code": code}) for code in HOSTILE_CODE]
    pool += [
        call("execute", {}),
        call("execute", {"code": 7}),
        call("execute", None, "{not json"),
        call("search", {"query": ""}),
        call("search", {"query": "x", "limit": "all", "detail": "everything"}),
        call("rm_rf", {"path": "/"}),
        call("", {}),
        ModelReply("", ()),
        ModelReply(
            "",
            (
                ToolCallRequest("a", "execute", {"code": "print(1)"}),
                ToolCallRequest("a", "nope", {}),
            ),
        ),
        call("execute", {"code": "x" * (MAX_REPLY_CHARS + 1)}),
    ]
    return [pool[i % len(pool)] for i in range(count)]


@pytest.mark.parametrize(
    ("output_format", "answers"),
    [("json", json_answers(80)), ("fenced", fenced_answers(60)), ("tools", tool_answers(60))],
    ids=["json-80", "fenced-60", "tools-60"],
)
async def test_every_bad_answer_costs_one_clean_round(hostile_engine, shop, output_format, answers):
    model = ScriptedModel(answers, supports_tools=output_format == "tools")
    agent = Agent(
        hostile_engine,
        model,
        output_format=output_format,
        max_rounds=len(answers),
        execution_timeout_s=1,
        context_tokens=8_000,
    )
    record = await agent.run("survive")
    assert record.status == "escalated", record.error
    assert len(record.rounds) == len(answers) == len(model.requests)
    for round_ in record.rounds:
        assert round_.steps, f"round {round_.index} recorded nothing"
        for step in round_.steps:
            assert step.feedback.strip(), f"round {round_.index}: no feedback"
            if step.kind == "malformed":
                assert "\n" not in step.feedback  # a one-line correction
            if step.kind == "execute":
                assert step.result is not None and step.result["status"] in (
                    "ok",
                    "error",
                    "timeout",
                    "limit",
                )
    statuses = {s.result["status"] for r in record.rounds for s in r.steps if s.result}
    assert {"timeout", "error", "ok"} <= statuses
    assert shop.orders == []  # no approval was ever given

"""Recording a run and replaying it: the same rounds, code and token counts, without the model."""

from __future__ import annotations

import pytest

from codemode.agent import Agent, RecordingModel, ReplayModel, ScriptedModel
from codemode.agent.providers import make_provider
from codemode.errors import ModelConfigError

pytestmark = pytest.mark.anyio

SCRIPT = [
    {
        "thoughts": "Plan: list, then total.",
        "execute": "from servers import shop\nitems = shop.list_items()\nprint(len(items))",
    },
    {"execute": "print(sum(i['price_cents'] for i in items))"},
    {"answer": "95 cents"},
]


async def test_a_recorded_run_replays_the_same(engine, tmp_path):
    transcript = tmp_path / "run.jsonl"
    recorded = await Agent(engine, RecordingModel(ScriptedModel(SCRIPT), transcript)).run("total?")
    replayed = await Agent(engine, ReplayModel(transcript)).run("total?")
    assert replayed.status == recorded.status == "done"
    assert replayed.answer == recorded.answer == "95 cents"
    assert [r.code for r in replayed.rounds] == [r.code for r in recorded.rounds]
    assert [r.result["stdout"] for r in replayed.rounds[:2]] == ["2\n", "95\n"]
    assert [(r.tokens_in, r.tokens_out) for r in replayed.rounds] == [
        (r.tokens_in, r.tokens_out) for r in recorded.rounds
    ]
    via_cli_name = make_provider(f"replay:{transcript}")
    assert isinstance(via_cli_name, ReplayModel)


async def test_a_replay_refuses_another_task_and_ends_when_the_recording_does(engine, tmp_path):
    transcript = tmp_path / "run.jsonl"
    await Agent(engine, RecordingModel(ScriptedModel(SCRIPT[:1]), transcript), max_rounds=1).run(
        "a"
    )
    other = await Agent(engine, ReplayModel(transcript)).run("b")
    assert other.status == "failed" and "another task" in (other.error or "")
    longer = await Agent(engine, ReplayModel(transcript), max_rounds=3).run("a")
    assert longer.status == "failed" and "no answer left" in (longer.error or "")


def test_an_unreadable_transcript_is_a_clear_error(tmp_path):
    with pytest.raises(ModelConfigError, match="cannot read the transcript"):
        ReplayModel(tmp_path / "missing.jsonl")

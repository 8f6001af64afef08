"""A run tells the truth: prose with no action and a reply cut at max_tokens are failed rounds
(never ``done``), a slow model shows progress, and no model call or retry outlasts the run."""

from __future__ import annotations

import random

import anyio
import httpx2
import pytest

from codemode.agent import Agent, ScriptedModel
from codemode.agent.loop import RunObserver, scaled_max_tokens
from codemode.agent.providers.base import ModelProvider, ModelReply, ModelRequest, ToolCallRequest
from codemode.agent.providers.http import HttpSettings, post_json
from codemode.agent.record import Round, RunRecord
from codemode.errors import ModelError, ModelTimeoutError

pytestmark = pytest.mark.anyio


async def test_prose_without_a_tool_call_or_final_answer_is_a_failed_round(engine):
    model = ScriptedModel(["Sure! First I will list the items, then add up their prices."])
    record = await Agent(engine, model, max_rounds=1).run("What do all items cost together?")
    assert record.status == "escalated" and record.answer is None
    step = record.rounds[0].steps[0]
    assert step.kind == "malformed" and "no tool call and no FINAL ANSWER" in step.feedback


async def test_after_the_correction_a_final_answer_ends_the_run(engine):
    model = ScriptedModel(["I will now work on it.", {"answer": "95 cents"}])
    record = await Agent(engine, model).run("What do all items cost together?")
    assert (record.status, record.answer, len(record.rounds)) == ("done", "95 cents", 2)
    correction = model.requests[1].messages[-1]
    assert correction.kind == "correction" and "FINAL ANSWER:" in correction.text


@pytest.mark.parametrize("stop_reason", ["length", "max_tokens"])
async def test_a_reply_cut_at_max_tokens_is_never_done(engine, stop_reason):
    model = ScriptedModel([ModelReply("FINAL ANSWER: the total is 9", stop_reason=stop_reason)])
    record = await Agent(engine, model, max_rounds=1, max_tokens=300).run("Total?")
    assert record.status == "escalated" and record.answer is None
    assert record.rounds[0].truncated
    assert "cut at the limit of 300 tokens" in record.rounds[0].steps[0].feedback


async def test_a_cut_tool_call_is_not_run_and_its_call_gets_the_correction(engine):
    cut = ModelReply(
        "", (ToolCallRequest("c7", "execute", {"code": "open('x', 'w').write('half')"}),)
    )
    cut = ModelReply(cut.text, cut.tool_calls, stop_reason="length")
    model = ScriptedModel([cut, {"answer": "gave up"}])
    record = await Agent(engine, model).run("Write x")
    assert [s.kind for s in record.rounds[0].steps] == ["malformed"]
    answer = model.requests[1].messages[-1]
    assert answer.role == "tool" and answer.tool_call_id == "c7" and "cut at" in answer.text


class _Waits(RunObserver):
    def __init__(self, answered: anyio.Event) -> None:
        self.answered = answered
        self.waits: list[float] = []
        self.asked: list[int] = []

    def model_asked(self, record: RunRecord, round_: Round) -> None:
        self.asked.append(round_.max_tokens)

    def model_waiting(self, record: RunRecord, round_: Round, waited_s: float) -> None:
        self.waits.append(waited_s)
        self.answered.set()


class _SlowModel(ModelProvider):
    """Answers only once the observer has reported that it is still waiting."""

    name = "slow"
    supports_tools = True

    def __init__(self, answered: anyio.Event) -> None:
        self.answered = answered

    async def complete(self, request: ModelRequest) -> ModelReply:
        await self.answered.wait()
        return ModelReply("FINAL ANSWER: 42", tokens_in=10, tokens_out=3)


async def test_a_slow_model_reports_that_it_is_still_being_waited_for(engine):
    answered = anyio.Event()
    observer = _Waits(answered)
    agent = Agent(engine, _SlowModel(answered), observer=observer, progress_interval_s=0.01)
    with anyio.fail_after(30):
        record = await agent.run("6*7?")
    assert record.status == "done" and observer.waits and observer.asked == [4096]


class _Silent(ModelProvider):
    name = "silent"
    supports_tools = True

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_model_that_never_answers_fails_the_run_at_its_time_limit(engine):
    model = _Silent()
    with anyio.fail_after(30):
        record = await Agent(engine, model, run_timeout_s=0.5).run("6*7?")
    assert record.status == "failed"
    assert "did not answer round 1" in (record.error or "") and "--run-timeout" in record.error
    assert 0 < (model.requests[0].timeout_s or 0) <= 0.5


async def test_interrupt_ends_the_run_as_interrupted_with_a_whole_record(engine):
    model = _Silent()
    agent = Agent(engine, model)

    class InterruptWhenAsked(RunObserver):
        def model_asked(self, record: RunRecord, round_: Round) -> None:
            agent.interrupt("interrupted by SIGTERM")

    agent.observer = InterruptWhenAsked()
    with anyio.fail_after(30):
        record = await agent.run("6*7?")
    assert (record.status, record.error, len(record.rounds)) == (
        "interrupted",
        "interrupted by SIGTERM",
        1,
    )
    assert record.to_dict()["status"] == "interrupted"


def test_max_tokens_shrink_to_what_the_model_writes_in_the_time_left():
    # 10 tokens/s seen so far, 100 s left: 80% of 1,000 tokens.
    assert scaled_max_tokens(4096, 100, 10_000, 100) == 800
    assert scaled_max_tokens(4096, 100, 10_000, 10_000) == 4096  # never above the setting
    assert scaled_max_tokens(4096, 0, 0, 100) == 4096  # speed unknown yet
    assert scaled_max_tokens(4096, 100, 10_000, 0.001) == 64  # a floor, not zero


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


async def test_retries_stop_when_the_call_has_no_time_left_for_one():
    calls: list[httpx2.Request] = []

    def overloaded(request: httpx2.Request) -> httpx2.Response:
        calls.append(request)
        return httpx2.Response(503, json={"error": "busy"})

    clock = _Clock()
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(overloaded)) as client:
        with pytest.raises(ModelError, match="no time is left for a retry") as caught:
            await post_json(
                client,
                "http://model/v1/chat/completions",
                headers={},
                body={},
                settings=HttpSettings(max_retries=10),
                sleep=clock.sleep,
                rng=random.Random(0),
                timeout_s=20,
                clock=clock,
            )
    assert 1 < len(calls) < 11 and clock.now < 20
    assert "--run-timeout" in (caught.value.fix or "")


async def test_a_read_timeout_is_not_retried():
    calls: list[httpx2.Request] = []

    def thinking(request: httpx2.Request) -> httpx2.Response:
        calls.append(request)
        raise httpx2.ReadTimeout("timed out", request=request)

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(thinking), timeout=120) as client:
        with pytest.raises(ModelTimeoutError, match="did not answer within 120 s"):
            await post_json(
                client,
                "http://model/v1/chat/completions",
                headers={},
                body={},
                settings=HttpSettings(max_retries=4),
                sleep=_Clock().sleep,
            )
    assert len(calls) == 1

"""The round loop both agents share: ask the model, act on its answer, feed the result back.

A round is one model call. Each round's reply is read by the output format into actions; each
action runs and its result goes back as the next message. A final answer ends the run
(``done``); after ``max_rounds`` rounds the run stops and escalates to the user with a short
summary (``escalated``); a provider or engine failure ends it as ``failed``, and ``interrupt`` (the
CLI's SIGINT/SIGTERM) as ``interrupted``. A malformed answer, a reply cut at ``max_tokens`` or
prose with no action costs its round and gets a one-line correction: none of them ends the run
as ``done``, and nothing the model writes can crash the loop.

With ``run_timeout_s`` the run has a deadline: each model call may take at most the time left
(retries included), and once the model's speed is known its ``max_tokens`` shrinks to what it
can write in that time. While the model thinks, ``RunObserver.model_waiting`` fires every
``progress_interval_s``.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from abc import ABC, abstractmethod
from typing import Any

import anyio
import anyio.to_thread

from codemode.agent.actions import Action, Finish, Malformed
from codemode.agent.context import fit_messages, message_tokens
from codemode.agent.feedback import escalation_summary
from codemode.agent.formats import OutputFormat, Reading
from codemode.agent.providers.base import (
    Message,
    ModelProvider,
    ModelReply,
    ModelRequest,
    clean_reply,
    count_text_tokens,
)
from codemode.agent.record import ApprovalRecord, Round, RunRecord, Step
from codemode.errors import (
    CodemodeError,
    ContextLengthError,
    ModelConfigError,
    ModelError,
    ModelTimeoutError,
    UsageError,
)
from codemode.policy.approval import ApprovalRequest, Approver
from codemode.policy.grants import ApprovalAnswer

__all__ = ["Approval", "Approver", "RoundLoop", "RunObserver", "deny_all", "scaled_max_tokens"]

log = logging.getLogger(__name__)

DEFAULT_MAX_ROUNDS = 8
DEFAULT_PROGRESS_INTERVAL_S = 10.0
_CONTEXT_RETRIES = 3
# Once the model's speed is known, max_tokens is what it writes in this share of the time left.
_TOKEN_TIME_SHARE = 0.8
_MIN_MAX_TOKENS = 64


# A tool call that waits for a human (the agent's name for the engine's request). The user's
# side is an ``Approver``: sync ones run in a worker thread (a terminal prompt may block);
# async ones are awaited.
Approval = ApprovalRequest


def deny_all(approval: Approval) -> bool:
    return False


def scaled_max_tokens(max_tokens: int, tokens_out: int, model_ms: float, left_s: float) -> int:
    """``max_tokens``, lowered to what the model writes in most of ``left_s`` at the speed it
    has shown so far (``tokens_out`` in ``model_ms``); unchanged before its speed is known."""
    if tokens_out <= 0 or model_ms <= 0:
        return max_tokens
    affordable = math.floor(tokens_out / (model_ms / 1000) * left_s * _TOKEN_TIME_SHARE)
    return max(_MIN_MAX_TOKENS, min(max_tokens, affordable))


class RunObserver:
    """Hooks for showing a run live (the CLI prints each round). All optional."""

    def run_started(self, record: RunRecord) -> None:
        """The run began; nothing has been asked yet."""

    def round_started(self, record: RunRecord, round_: Round) -> None:
        """A round began: the model is being asked."""

    def model_asked(self, record: RunRecord, round_: Round) -> None:
        """The request is on its way (``round_.max_tokens`` is set); once per model call."""

    def model_waiting(self, record: RunRecord, round_: Round, waited_s: float) -> None:
        """The model has not answered after ``waited_s`` (every progress interval)."""

    def model_replied(self, record: RunRecord, round_: Round) -> None:
        """The model answered: ``round_.thoughts`` and its reply are known."""

    def step_done(self, record: RunRecord, round_: Round, step: Step) -> None:
        """One action of the round ran and its feedback is ready."""

    def run_finished(self, record: RunRecord) -> None:
        """The run ended: done, escalated, failed or interrupted."""


class RoundLoop(ABC):
    """The shared loop. Subclasses say how to prompt and how to act."""

    paradigm = "loop"

    def __init__(
        self,
        model: ModelProvider,
        output_format: OutputFormat,
        *,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        approve: Approver | None = None,
        observer: RunObserver | None = None,
        context_tokens: int = 100_000,
        max_tokens: int = 4096,
        run_timeout_s: float | None = None,
        progress_interval_s: float = DEFAULT_PROGRESS_INTERVAL_S,
    ) -> None:
        if max_rounds < 1:
            raise UsageError("max_rounds must be at least 1", fix="e.g. --max-rounds 8")
        if run_timeout_s is not None and run_timeout_s <= 0:
            raise UsageError("the run's time limit must be positive", fix="e.g. --run-timeout 600")
        self.model = model
        self.format = output_format
        self.max_rounds = max_rounds
        self.approve: Approver = approve or deny_all
        self.observer = observer or RunObserver()
        self.context_tokens = context_tokens
        self.max_tokens = max_tokens
        self.run_timeout_s = run_timeout_s
        self.progress_interval_s = progress_interval_s
        self._deadline: float | None = None
        self._scope: anyio.CancelScope | None = None
        self._interrupted: str | None = None

    # --- what subclasses provide ---------------------------------------------------------------

    @abstractmethod
    def system_prompt(self) -> str: ...

    async def start(self) -> None:  # noqa: B027 - an optional hook, a no-op by default
        """Called once before the first round."""

    @abstractmethod
    async def act(self, action: Action, round_: Round) -> tuple[Step, str, bool]:
        """Run one non-final action: the step record, the text fed back, whether it failed."""

    async def stop(self, record: RunRecord) -> None:  # noqa: B027 - an optional hook
        """Called once at the end, whatever happened (close the session)."""

    def interrupt(self, reason: str = "interrupted") -> None:
        """Stop the run where it is (from another task, e.g. a signal handler): it ends as
        ``interrupted`` with ``reason`` as its error, and ``stop`` still runs."""
        self._interrupted = reason
        if self._scope is not None:
            self._scope.cancel()

    # --- the loop ------------------------------------------------------------------------

    async def run(self, task: str) -> RunRecord:
        record = RunRecord(
            task=task,
            model=self.model.name,
            paradigm=self.paradigm,
            output_format=self.format.name,
            max_rounds=self.max_rounds,
        )
        started = time.perf_counter()
        if self.run_timeout_s is not None:
            self._deadline = time.monotonic() + self.run_timeout_s
        self._scope = anyio.CancelScope()
        if self._interrupted is not None:
            self._scope.cancel()
        self.observer.run_started(record)
        try:
            with self._scope:
                await self._rounds(record, task)
            if self._scope.cancelled_caught:
                record.status, record.error = "interrupted", self._interrupted or "interrupted"
        except ModelConfigError:
            record.status = "failed"
            raise
        except CodemodeError as error:
            log.info("run failed: %s", error)
            record.status, record.error = "failed", str(error)
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await self.stop(record)
                finally:
                    record.wall_ms = (time.perf_counter() - started) * 1000
                    self.observer.run_finished(record)
        return record

    async def _rounds(self, record: RunRecord, task: str) -> None:
        messages: list[Message] = [Message("user", task, kind="task")]
        await self.start()
        system = self.system_prompt()
        for index in range(1, self.max_rounds + 1):
            round_ = Round(index)
            record.rounds.append(round_)
            round_started = time.perf_counter()
            self.observer.round_started(record, round_)
            reply, messages = await self._ask(record, round_, system, messages)
            round_.tokens_in, round_.tokens_out = reply.tokens_in, reply.tokens_out
            round_.model_ms = (time.perf_counter() - round_started) * 1000
            round_.reply = reply.text
            round_.truncated = reply.truncated
            reading = self._read(reply, round_)
            round_.thoughts = reading.thoughts
            messages.append(self.format.assistant_message(reply))
            self.observer.model_replied(record, round_)
            for action in reading.actions:
                if isinstance(action, Finish):
                    round_.steps.append(Step("answer"))
                    record.answer, record.status = action.answer, "done"
                    break
                step, text, failed = await self._act(action, round_)
                round_.steps.append(step)
                messages.append(self.format.feedback(action, text, is_error=failed))
                self.observer.step_done(record, round_, step)
            round_.wall_ms = (time.perf_counter() - round_started) * 1000
            if record.status == "done":
                return
        record.status = "escalated"
        record.summary = escalation_summary(record)

    def _read(self, reply: ModelReply, round_: Round) -> Reading:
        """The reply's actions; a reply cut at ``max_tokens`` is never acted on (its code or
        answer is incomplete): each of its tool calls gets the correction instead."""
        if not reply.truncated:
            return self.format.read(reply)
        problem = (
            f"the reply was cut at the limit of {round_.max_tokens:,} tokens, so nothing in it "
            "was run: write a shorter reply (less prose, shorter code)"
        )
        calls = [Malformed(problem, call.id) for call in reply.tool_calls]
        return Reading("", tuple(calls) or (Malformed(problem),))

    async def _act(self, action: Action, round_: Round) -> tuple[Step, str, bool]:
        if isinstance(action, Malformed):
            step = Step("malformed", problem=action.problem)
            step.feedback = f"Unusable answer: {action.problem}. {self.format.reminder}"
            return step, step.feedback, True
        step, text, failed = await self.act(action, round_)
        step.feedback = text
        return step, text, failed

    def _limits(self, record: RunRecord, round_: Round) -> tuple[int, float | None]:
        """This call's max_tokens and time limit: the run's time left, and the tokens the
        model has shown it writes in that time."""
        if self._deadline is None:
            return self.max_tokens, None
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise ModelTimeoutError(
                f"the run's time limit ({self.run_timeout_s:g} s) ran out before round "
                f"{round_.index} could ask the model",
                fix="raise --run-timeout (run_timeout_s in [agent]) or use a faster model",
            )
        return scaled_max_tokens(self.max_tokens, record.tokens_out, record.model_ms, left), left

    async def _complete(
        self, record: RunRecord, round_: Round, request: ModelRequest
    ) -> ModelReply:
        """The model's reply, with ``model_waiting`` every progress interval meanwhile and the
        call cut at its time limit whatever the provider does."""
        asked = time.perf_counter()
        replies: list[ModelReply] = []
        failures: list[BaseException] = []  # raised after the task group, which would wrap them

        async def heartbeat() -> None:
            while True:
                await anyio.sleep(self.progress_interval_s)
                self.observer.model_waiting(record, round_, time.perf_counter() - asked)

        async with anyio.create_task_group() as group:
            group.start_soon(heartbeat)
            try:
                with anyio.fail_after(request.timeout_s):
                    replies.append(await self.model.complete(request))
            except TimeoutError:
                failures.append(
                    ModelTimeoutError(
                        f"{self.model.name} did not answer round {round_.index} in the "
                        f"{request.timeout_s or 0:.0f} s the run had left "
                        f"(limit {self.run_timeout_s:g} s)",
                        fix="raise --run-timeout (run_timeout_s in [agent]), lower max_tokens "
                        "for this model in [agent.models], or use a faster model",
                    )
                )
            except Exception as error:  # noqa: BLE001 - re-raised below, outside the group
                failures.append(error)
            group.cancel_scope.cancel()
        if failures:
            raise failures[0]
        return replies[0]

    async def _ask(
        self, record: RunRecord, round_: Round, system: str, messages: list[Message]
    ) -> tuple[ModelReply, list[Message]]:
        """One model call, with the conversation fitted to the budget (tighter after the model
        says it is too long)."""
        tools = self.format.tools()
        fixed = count_text_tokens(system) + sum(
            message_tokens(Message("user", str(tool.to_json()))) for tool in tools
        )
        budget = self.context_tokens
        for attempt in range(_CONTEXT_RETRIES + 1):
            fit = fit_messages(messages, budget=budget, fixed=fixed)
            record.context_trims += fit.trims
            messages = fit.messages
            max_tokens, timeout_s = self._limits(record, round_)
            request = ModelRequest(system, tuple(messages), tools, max_tokens, timeout_s)
            round_.max_tokens = max_tokens
            self.observer.model_asked(record, round_)
            try:
                return clean_reply(await self._complete(record, round_, request)), messages
            except ContextLengthError:
                if attempt == _CONTEXT_RETRIES:
                    raise
                budget = max(int(min(budget, fit.tokens) * 0.6), fixed + 1)
            except CodemodeError:
                raise
            except Exception as error:  # a provider bug must not take the loop down
                log.exception("the model provider failed")
                raise ModelError(
                    f"{self.model.name} failed unexpectedly: {type(error).__name__}: {error}",
                    fix="see the log; this is a bug in the provider",
                ) from error
        raise AssertionError("unreachable")  # pragma: no cover

    async def decide(self, approval: Approval, round_: Round, step: Step) -> ApprovalAnswer:
        """Ask the user (through ``approve``); record the decision and the wait."""
        started = time.perf_counter()
        try:
            if inspect.iscoroutinefunction(self.approve):
                answer: Any = await self.approve(approval)
            else:
                answer = await anyio.to_thread.run_sync(self.approve, approval)
                if inspect.isawaitable(answer):
                    answer = await answer
            decided = answer if isinstance(answer, ApprovalAnswer) else ApprovalAnswer(bool(answer))
        except Exception as error:  # noqa: BLE001 - a broken callback denies, it does not crash
            log.warning("the approval callback failed (%s); the call is denied", error)
            decided = ApprovalAnswer(False)
        step.approvals.append(
            ApprovalRecord(approval.tool, approval.arguments, approval.reason, decided.allow)
        )
        round_.approval_ms += (time.perf_counter() - started) * 1000
        return decided

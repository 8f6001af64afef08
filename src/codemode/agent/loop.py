"""The round loop both agents share: ask the model, act on its answer, feed the result back.

A round is one model call. Each round's reply is read by the output format into actions; each
action runs and its result goes back as the next message. A final answer ends the run
(``done``); after ``max_rounds`` rounds the run stops and escalates to the user with a short
summary (``escalated``); a provider or engine failure ends it as ``failed``. A malformed answer
costs its round and gets a one-line correction; nothing the model writes can crash the loop.
"""

from __future__ import annotations

import inspect
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from codemode.agent.actions import Action, Finish, Malformed
from codemode.agent.context import fit_messages, message_tokens
from codemode.agent.feedback import escalation_summary
from codemode.agent.formats import OutputFormat
from codemode.agent.providers.base import (
    Message,
    ModelProvider,
    ModelReply,
    ModelRequest,
    clean_reply,
    count_text_tokens,
)
from codemode.agent.record import ApprovalDecision, Round, RunRecord, Step
from codemode.errors import (
    CodemodeError,
    ContextLengthError,
    ModelConfigError,
    ModelError,
    UsageError,
)
from codemode.policy.grants import ApprovalAnswer

__all__ = ["Approval", "Approver", "RoundLoop", "RunObserver", "deny_all"]

log = logging.getLogger(__name__)

DEFAULT_MAX_ROUNDS = 8
_CONTEXT_RETRIES = 3


@dataclass(frozen=True, slots=True)
class Approval:
    """A tool call that waits for a human: the call as the code made it, and why it waits."""

    id: str
    tool: str
    arguments: Any
    reason: str
    # The whole approval view (digest, the file of long arguments, the values it sends).
    view: dict[str, Any] = field(default_factory=dict)


# The user's side of an approval: True allows the call; an ApprovalAnswer also says how long
# it holds. Sync callbacks run in a worker thread (a terminal prompt may block); async ones
# are awaited.
Approver = Callable[[Approval], bool | ApprovalAnswer | Awaitable[bool] | Awaitable[ApprovalAnswer]]


def deny_all(approval: Approval) -> bool:
    return False


class RunObserver:
    """Hooks for showing a run live (the CLI prints each round). All optional."""

    def run_started(self, record: RunRecord) -> None:
        """The run began; nothing has been asked yet."""

    def round_started(self, record: RunRecord, round_: Round) -> None:
        """A round began: the model is being asked."""

    def model_replied(self, record: RunRecord, round_: Round) -> None:
        """The model answered: ``round_.thoughts`` and its reply are known."""

    def step_done(self, record: RunRecord, round_: Round, step: Step) -> None:
        """One action of the round ran and its feedback is ready."""

    def run_finished(self, record: RunRecord) -> None:
        """The run ended: done, escalated or failed."""


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
    ) -> None:
        if max_rounds < 1:
            raise UsageError("max_rounds must be at least 1", fix="e.g. --max-rounds 8")
        self.model = model
        self.format = output_format
        self.max_rounds = max_rounds
        self.approve: Approver = approve or deny_all
        self.observer = observer or RunObserver()
        self.context_tokens = context_tokens
        self.max_tokens = max_tokens

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
        self.observer.run_started(record)
        messages: list[Message] = [Message("user", task, kind="task")]
        try:
            await self.start()
            system = self.system_prompt()
            for index in range(1, self.max_rounds + 1):
                round_ = Round(index)
                record.rounds.append(round_)
                round_started = time.perf_counter()
                self.observer.round_started(record, round_)
                reply, messages = await self._ask(record, system, messages)
                round_.tokens_in, round_.tokens_out = reply.tokens_in, reply.tokens_out
                round_.model_ms = (time.perf_counter() - round_started) * 1000
                round_.reply = reply.text
                reading = self.format.read(reply)
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
                    break
            else:
                record.status = "escalated"
                record.summary = escalation_summary(record)
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

    async def _act(self, action: Action, round_: Round) -> tuple[Step, str, bool]:
        if isinstance(action, Malformed):
            step = Step("malformed", problem=action.problem)
            step.feedback = f"Unusable answer: {action.problem}. {self.format.reminder}"
            return step, step.feedback, True
        step, text, failed = await self.act(action, round_)
        step.feedback = text
        return step, text, failed

    async def _ask(
        self, record: RunRecord, system: str, messages: list[Message]
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
            request = ModelRequest(system, tuple(messages), tools, self.max_tokens)
            try:
                return clean_reply(await self.model.complete(request)), messages
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
            ApprovalDecision(approval.tool, approval.arguments, approval.reason, decided.allow)
        )
        round_.approval_ms += (time.perf_counter() - started) * 1000
        return decided

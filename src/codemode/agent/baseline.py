"""The tool-calling baseline: how agents work today, in the same harness as the codemode agent.

Every upstream tool's definition goes into every request, every call is one model round trip,
and every result comes back whole into the context. Calls go straight to the catalog (no
sandbox, no privacy layer: a tool-calling agent sees the raw data), with the same policy: a
denied call is an error result, a call that needs approval asks the same ``approve`` callback.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any

from codemode.agent.actions import Action, Call, Finish, Malformed
from codemode.agent.formats import NativeTools, Reading
from codemode.agent.loop import DEFAULT_MAX_ROUNDS, Approval, Approver, RoundLoop, RunObserver
from codemode.agent.parsing import MAX_REPLY_CHARS
from codemode.agent.providers.base import (
    Message,
    MessageKind,
    ModelProvider,
    ModelReply,
    ToolDefinition,
)
from codemode.agent.record import Round, Step
from codemode.errors import CodemodeError, ModelConfigError
from codemode.tools import ToolCall, ToolSpec

if TYPE_CHECKING:
    from codemode.engine import Codemode

__all__ = ["BASELINE_SYSTEM_PROMPT", "ToolCallingAgent", "baseline_tool_name"]

BASELINE_SYSTEM_PROMPT = (
    "You solve the user's task by calling the tools you are given, one step at a time. "
    "Read each result before the next call. When the task is done, reply with a short final "
    "answer as plain text and no tool call: that ends the run."
)
_NAME = re.compile(r"[^A-Za-z0-9_-]")


def baseline_tool_name(spec: ToolSpec) -> str:
    """``server__tool``, as MCP clients name tools for models (64 characters at most)."""
    return _NAME.sub("_", f"{spec.server}__{spec.name}")[:64]


def _result_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return f"<{len(value):,} bytes>"
    return json.dumps(value, ensure_ascii=False, default=str)


class _ToolCallingFormat(NativeTools):
    """Native tool calling over the upstream tools themselves."""

    reminder = "Call one of the tools you are given, or reply with text and no tool call to finish."

    def __init__(self, tools: tuple[ToolDefinition, ...]) -> None:
        self._tools = tools
        self._names = {tool.name for tool in tools}

    def tools(self) -> tuple[ToolDefinition, ...]:
        return self._tools

    def instructions(self) -> str:
        return BASELINE_SYSTEM_PROMPT

    def read(self, reply: ModelReply) -> Reading:
        if not reply.tool_calls:
            return super().read(reply)
        actions: list[Action] = []
        for call in reply.tool_calls:
            if call.arguments is None:
                actions.append(Malformed("the tool arguments were not a JSON object", call.id))
            elif call.name not in self._names:
                actions.append(Malformed(f"there is no tool {call.name[:60]!r}", call.id))
            else:
                actions.append(Call(call.name, call.arguments, call.id))
        return Reading(reply.text.strip(), tuple(actions))

    def feedback(self, action: Action, text: str, *, is_error: bool = False) -> Message:
        call_id = action.call_id if isinstance(action, Call | Malformed) else None
        if call_id is None:
            return Message("user", text, kind="correction", is_error=is_error)
        kind: MessageKind = "correction" if isinstance(action, Malformed) else "result"
        return Message("tool", text, tool_call_id=call_id, kind=kind, is_error=is_error)


class ToolCallingAgent(RoundLoop):
    """``ToolCallingAgent(engine, model).run(task)`` -> ``RunRecord`` (paradigm "tool-calling")."""

    paradigm = "tool-calling"

    def __init__(
        self,
        engine: Codemode,
        model: ModelProvider,
        *,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        approve: Approver | None = None,
        observer: RunObserver | None = None,
        context_tokens: int = 1_000_000,
        max_tokens: int = 4096,
    ) -> None:
        if not model.supports_tools:
            raise ModelConfigError(
                f"{model.name} has no native tool calling, which the baseline needs",
                fix="use a model with tool calling for the tool-calling baseline",
            )
        from codemode.policy import Policy

        self.engine = engine
        self.specs = {baseline_tool_name(spec): spec for spec in engine.catalog.specs()}
        tools = tuple(
            ToolDefinition(name, spec.description or spec.name, spec.input_schema)
            for name, spec in self.specs.items()
        )
        self.policy = Policy(engine.config.policy, self._spec)
        super().__init__(
            model,
            _ToolCallingFormat(tools),
            max_rounds=max_rounds,
            approve=approve,
            observer=observer,
            context_tokens=context_tokens,
            max_tokens=max_tokens,
        )

    def _spec(self, server: str, tool: str) -> ToolSpec | None:
        try:
            return self.engine.catalog.get(server, tool)
        except CodemodeError:
            return None

    def system_prompt(self) -> str:
        return BASELINE_SYSTEM_PROMPT

    async def act(self, action: Action, round_: Round) -> tuple[Step, str, bool]:
        if isinstance(action, Finish) or not isinstance(action, Call):
            raise TypeError(f"not an action for the baseline: {action!r}")
        spec = self.specs[action.tool]
        qualified = f"{spec.server}.{spec.name}"
        step = Step("tool", tool=qualified, arguments=action.arguments)
        call = ToolCall(spec.server, spec.name, action.arguments)
        decision = self.policy.decide(call, spec)
        if decision.action == "deny":
            step.problem = f"{qualified} was not run: denied by policy: {decision.reason}"
            return step, f"error: {step.problem}", True
        if decision.action == "ask":
            approval = Approval(
                f"baseline-{round_.index}", qualified, action.arguments, decision.reason
            )
            if not (await self.decide(approval, round_, step)).allow:
                step.problem = f"{qualified} was not run: the user denied the approval it needs"
                return step, f"error: {step.problem}", True
        started = time.perf_counter()
        try:
            result = await self.engine.catalog.call(spec.server, spec.name, action.arguments)
        except CodemodeError as error:
            step.problem = str(error)
            return step, f"error: {error}", True
        finally:
            round_.tool_ms += (time.perf_counter() - started) * 1000
        if result.is_error:
            step.problem = result.error_message or _result_text(result.value)[:500]
            return step, f"error: {result.error_message or _result_text(result.value)}", True
        text = _result_text(result.value)
        if len(text) > MAX_REPLY_CHARS * 10:
            text = text[: MAX_REPLY_CHARS * 10] + f"\n[... {len(text):,} characters in all]"
        return step, text, False

"""Models for tests and benchmarks: a scripted model and a replay of recorded transcripts.

A script is a list of answers (or one function) played in order. An answer is a ``ModelReply``,
a plain string (the model's text), a mapping (``{"execute": code, "thoughts": ...}``,
``{"search": query}``, ``{"answer": text}``, or ``{"text": ..., "tool_calls": [...]}``), or a
function of the request returning one of those: a reference answer can read the results so far.
Token counts are measured with the project's tokenizer on the request and the reply, so runs
with a scripted model give exact, repeatable ledgers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from codemode.agent.providers.base import (
    ModelProvider,
    ModelReply,
    ModelRequest,
    ToolCallRequest,
    count_text_tokens,
    reply_text_for_count,
    request_text_for_count,
)
from codemode.errors import ModelConfigError, ModelError

__all__ = [
    "RecordingModel",
    "ReplayModel",
    "Script",
    "ScriptStep",
    "ScriptedModel",
    "as_reply",
    "load_script",
]

ScriptStep: TypeAlias = (
    str | ModelReply | Mapping[str, Any] | Callable[[ModelRequest], "ScriptStep"]
)
Script: TypeAlias = Sequence[ScriptStep] | Callable[[ModelRequest], ScriptStep]


def as_reply(step: ScriptStep, request: ModelRequest, *, call_id: str = "call_0") -> ModelReply:
    """Turn one script step into a reply (calling it first when it is a function)."""
    while callable(step):
        step = step(request)
    if isinstance(step, ModelReply):
        return step
    if isinstance(step, str):
        return ModelReply(text=step)
    data = dict(step)
    thoughts = str(data.pop("thoughts", "") or "")
    if "execute" in data:
        code = data.pop("execute")
        return ModelReply(thoughts, (ToolCallRequest(call_id, "execute", {"code": code}),))
    if "search" in data:
        arguments = {"query": data.pop("search"), **data}
        return ModelReply(thoughts, (ToolCallRequest(call_id, "search", arguments),))
    if "call" in data:  # a tool of the baseline: {"call": "crm__get_lead", "arguments": {...}}
        arguments = data.get("arguments") or {}
        return ModelReply(thoughts, (ToolCallRequest(call_id, str(data["call"]), arguments),))
    if "answer" in data:  # the final answer as the tool-calling format reads it
        return ModelReply(text=f"FINAL ANSWER: {data['answer']}")
    return ModelReply.from_json(data)


class ScriptedModel(ModelProvider):
    """Plays a script. ``requests`` keeps every request it was sent (for tests)."""

    def __init__(
        self,
        script: Script,
        *,
        name: str = "scripted",
        supports_tools: bool = True,
        count_tokens: bool = True,
    ) -> None:
        self.script = script
        self.name = name if ":" in name else f"scripted:{name}"
        self.supports_tools = supports_tools
        self.count_tokens = count_tokens
        self.requests: list[ModelRequest] = []
        self._next = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        index = self._next
        self._next += 1
        if callable(self.script):
            step: ScriptStep = self.script
        elif index < len(self.script):
            step = self.script[index]
        else:
            raise ModelError(
                f"the scripted model has no answer left (it had {len(self.script)})",
                fix="add answers to the script, or lower max_rounds",
            )
        reply = as_reply(step, request, call_id=f"call_{index}")
        if not self.count_tokens or reply.tokens_in or reply.tokens_out:
            return reply
        return ModelReply(
            reply.text,
            reply.tool_calls,
            sum(count_text_tokens(piece) for piece in request_text_for_count(request)),
            count_text_tokens(reply_text_for_count(reply)),
            reply.stop_reason or "scripted",
        )


def load_script(path: Path) -> list[ScriptStep]:
    """A script file: a JSON list of answers (strings or objects, see the module docs)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelConfigError(
            f"cannot read the script {str(path)!r}: {error}",
            fix='write a JSON list such as [{"execute": "print(1)"}, {"answer": "done"}]',
        ) from None
    if not isinstance(data, list) or not all(isinstance(s, str | dict) for s in data):
        raise ModelConfigError(
            f"the script {str(path)!r} is not a JSON list of strings and objects",
            fix='write a JSON list such as [{"execute": "print(1)"}, {"answer": "done"}]',
        )
    return list(data)


def _task_of(request: ModelRequest) -> str:
    for message in request.messages:
        if message.kind == "task":
            return message.text
    return request.messages[0].text if request.messages else ""


class RecordingModel(ModelProvider):
    """Wraps a provider and appends every exchange to a JSON-lines transcript."""

    def __init__(self, inner: ModelProvider, path: Path) -> None:
        self.inner = inner
        self.path = path
        self.name = inner.name
        self.supports_tools = inner.supports_tools

    async def complete(self, request: ModelRequest) -> ModelReply:
        reply = await self.inner.complete(request)
        line = {"task": _task_of(request), "reply": reply.to_json()}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
        return reply

    async def aclose(self) -> None:
        await self.inner.aclose()


class ReplayModel(ModelProvider):
    """Replays a transcript written by ``RecordingModel``, answer by answer, with the token
    counts that were recorded. Refuses a run whose task differs from the recorded one."""

    def __init__(self, path: Path, *, supports_tools: bool = True) -> None:
        self.path = path
        self.name = f"replay:{path.name}"
        self.supports_tools = supports_tools
        self.exchanges: list[dict[str, Any]] = []
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
            self.exchanges = [json.loads(line) for line in lines if line.strip()]
        except (OSError, ValueError) as error:
            raise ModelConfigError(
                f"cannot read the transcript {str(path)!r}: {error}",
                fix="record one with RecordingModel (JSON lines of task and reply)",
            ) from None
        self._next = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        if self._next >= len(self.exchanges):
            raise ModelError(
                f"the transcript {self.path.name} has no answer left "
                f"(it recorded {len(self.exchanges)})",
                fix="record the run again: it went further than the recording",
            )
        exchange = self.exchanges[self._next]
        self._next += 1
        recorded = exchange.get("task")
        if recorded is not None and recorded != _task_of(request):
            raise ModelError(
                f"the transcript {self.path.name} was recorded for another task",
                fix="replay it with the task it was recorded for",
            )
        return ModelReply.from_json(exchange.get("reply") or {})

"""The model seam: a conversation goes in, one reply comes out.

Every provider (Anthropic, OpenAI-compatible, scripted, replay) is a ``ModelProvider``: one
``complete`` method over provider-neutral messages, plus ``aclose``. The loop never sees a wire
format; each provider maps these types to its own.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

__all__ = [
    "TRUNCATED_STOP_REASONS",
    "Message",
    "MessageKind",
    "ModelProvider",
    "ModelReply",
    "ModelRequest",
    "Role",
    "ToolCallRequest",
    "ToolDefinition",
    "clean_reply",
    "clean_text",
    "count_text_tokens",
    "reply_text_for_count",
    "request_text_for_count",
]

Role = Literal["user", "assistant", "tool"]
# What a message is to the loop (providers ignore it): the context fitter shortens old
# "result" messages first and never drops the "task".
MessageKind = Literal["task", "reply", "result", "correction", "note"]


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """A tool call the model asked for. ``arguments`` is None when they were not a JSON object
    (``raw_arguments`` then holds what the model sent)."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.raw_arguments is not None:
            data["raw_arguments"] = self.raw_arguments
        return data


@dataclass(frozen=True, slots=True)
class Message:
    """One turn. ``tool`` messages answer the assistant's tool call ``tool_call_id``."""

    role: Role
    text: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    tool_call_id: str | None = None
    kind: MessageKind = "note"
    is_error: bool = False

    def with_text(self, text: str) -> Message:
        return Message(
            self.role, text, self.tool_calls, self.tool_call_id, self.kind, self.is_error
        )


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    name: str
    description: str
    input_schema: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


@dataclass(frozen=True, slots=True)
class ModelRequest:
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...] = ()
    max_tokens: int = 4096
    # The longest this call may take, retries included (None: the provider's own timeout).
    timeout_s: float | None = None


# Stop reasons meaning the reply was cut at ``max_tokens`` (OpenAI, Anthropic, Ollama).
TRUNCATED_STOP_REASONS = frozenset({"length", "max_tokens", "max_output_tokens"})


@dataclass(frozen=True, slots=True)
class ModelReply:
    """What the model said: text and/or tool calls, and what it cost."""

    text: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    tokens_in: int = 0
    tokens_out: int = 0
    stop_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def truncated(self) -> bool:
        return self.stop_reason in TRUNCATED_STOP_REASONS

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tool_calls": [call.to_json() for call in self.tool_calls],
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "stop_reason": self.stop_reason,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelReply:
        calls = tuple(
            ToolCallRequest(
                str(call.get("id", f"call_{index}")),
                str(call["name"]),
                call.get("arguments"),
                call.get("raw_arguments"),
            )
            for index, call in enumerate(data.get("tool_calls") or [])
        )
        return cls(
            text=str(data.get("text") or ""),
            tool_calls=calls,
            tokens_in=int(data.get("tokens_in") or 0),
            tokens_out=int(data.get("tokens_out") or 0),
            stop_reason=data.get("stop_reason"),
        )


class ModelProvider(ABC):
    """A model behind one method. ``supports_tools`` says whether it takes native tools."""

    name: str = "model"
    supports_tools: bool = False

    @abstractmethod
    async def complete(self, request: ModelRequest) -> ModelReply:
        """One reply. Raises ``ModelError`` (``ContextLengthError`` when the request is too
        long for the model) after the provider's own retries."""

    async def aclose(self) -> None:  # noqa: B027 - an optional hook, a no-op by default
        """Release connections. Nothing to do by default."""


# --- token counts for providers that report none (scripted, replay, some local servers) ---------


def clean_text(text: str) -> str:
    """Text that encodes as UTF-8: lone surrogates (a model can send them as JSON escapes)
    become U+FFFD instead of breaking every encoder downstream."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def clean_value(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [clean_value(item) for item in value]
    if isinstance(value, dict):
        return {clean_text(str(key)): clean_value(item) for key, item in value.items()}
    return value


def clean_reply(reply: ModelReply) -> ModelReply:
    """The reply with every string made encodable (see ``clean_text``)."""
    calls = tuple(
        ToolCallRequest(
            clean_text(call.id),
            clean_text(call.name),
            clean_value(call.arguments),
            None if call.raw_arguments is None else clean_text(call.raw_arguments),
        )
        for call in reply.tool_calls
    )
    return ModelReply(
        clean_text(reply.text),
        calls,
        reply.tokens_in,
        reply.tokens_out,
        reply.stop_reason,
        reply.extra,
    )


@lru_cache(maxsize=8192)
def count_text_tokens(text: str) -> int:
    from codemode.tokens import count_tokens

    return count_tokens(clean_text(text)) if text else 0


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _message_text(message: Message) -> str:
    parts = [message.role, message.text]
    parts += [f"{call.name}{_dumps(call.arguments)}" for call in message.tool_calls]
    return "\n".join(parts)


def request_text_for_count(request: ModelRequest) -> list[str]:
    """The pieces of a request as a model would read them, for counting tokens."""
    pieces = [request.system]
    pieces += [_dumps(tool.to_json()) for tool in request.tools]
    pieces += [_message_text(message) for message in request.messages]
    return pieces


def reply_text_for_count(reply: ModelReply) -> str:
    calls = [f"{call.name}{_dumps(call.arguments)}" for call in reply.tool_calls]
    return "\n".join([reply.text, *calls]) if calls else reply.text

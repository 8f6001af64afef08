"""Keeping the conversation under the model's context budget, never losing the task.

In order, until it fits: shorten the oldest results and corrections to their first line; then
shorten the oldest replies (their code becomes a placeholder); then drop the oldest whole rounds
(a reply with the results that answer it). The task message and the latest round always stay.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from codemode.agent.providers.base import Message, ToolCallRequest, count_text_tokens

__all__ = ["ContextFit", "fit_messages", "message_tokens"]

_SHORTENED = "[shortened to save context]"
_CODE_OMITTED = "[code of an earlier round, omitted to save context]"


def message_tokens(message: Message) -> int:
    tokens = count_text_tokens(message.text) + 4
    for call in message.tool_calls:
        arguments = call.raw_arguments if call.arguments is None else json.dumps(call.arguments)
        tokens += count_text_tokens(f"{call.name}{arguments}") + 4
    return tokens


class ContextFit:
    """The result of fitting: the messages to send and how many were shortened or dropped."""

    def __init__(self, messages: list[Message], trims: int, tokens: int) -> None:
        self.messages = messages
        self.trims = trims
        self.tokens = tokens


def _last_reply_index(messages: Sequence[Message]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].kind == "reply":
            return index
    return len(messages)


def _shorten_result(message: Message) -> Message:
    first = message.text.strip().splitlines()[0][:200] if message.text.strip() else ""
    return message.with_text(f"{first} {_SHORTENED}".strip())


def _shorten_reply(message: Message) -> Message:
    calls = tuple(
        ToolCallRequest(call.id, call.name, {"code": _CODE_OMITTED})
        if call.name == "execute"
        else call
        for call in message.tool_calls
    )
    text = message.text if len(message.text) < 300 else message.text[:300] + " " + _SHORTENED
    if not message.tool_calls and "```" in text:
        text = f"{message.text[:120]} {_CODE_OMITTED}"
    return Message(message.role, text, calls, message.tool_call_id, message.kind, message.is_error)


def fit_messages(messages: Sequence[Message], *, budget: int, fixed: int = 0) -> ContextFit:
    """``fixed``: tokens outside the messages (system prompt, tool definitions)."""
    fitted = list(messages)
    costs = [message_tokens(m) for m in fitted]
    total = fixed + sum(costs)
    trims = 0
    if total <= budget:
        return ContextFit(fitted, 0, total)
    keep_from = _last_reply_index(fitted)
    for kinds, shorten in (
        (("result", "correction"), _shorten_result),
        (("reply",), _shorten_reply),
    ):
        for index in range(keep_from):
            if total <= budget:
                return ContextFit(fitted, trims, total)
            message = fitted[index]
            if message.kind not in kinds or _SHORTENED in message.text:
                continue
            shorter = shorten(message)
            cost = message_tokens(shorter)
            if cost < costs[index]:
                total -= costs[index] - cost
                fitted[index], costs[index] = shorter, cost
                trims += 1
    # Drop whole rounds, oldest first: a reply and everything up to the next reply.
    while total > budget:
        replies = [i for i, m in enumerate(fitted) if m.kind == "reply"]
        if len(replies) < 2:
            break
        start, end = replies[0], replies[1]
        total -= sum(costs[start:end])
        del fitted[start:end], costs[start:end]
        trims += 1
    return ContextFit(fitted, trims, total)

"""Helpers to write reference answers: the scripted model plays them, so the harness is checked
and tokens and rounds are measured exactly, for both paradigms.

codemode:      search("..."), execute(code, thoughts=...), answer("...")
tool calling:  call("crm__get_lead", lead_id=...), calls([...]) for parallel calls, and
               then(fn): a step computed from the results so far (a model reads them too).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from codemode.agent.providers.base import ModelReply, ModelRequest, ToolCallRequest

Step = Any


def search(query: str, thoughts: str = "") -> dict[str, Any]:
    return {"search": query, "thoughts": thoughts}


def execute(code: str, thoughts: str = "") -> dict[str, Any]:
    return {"execute": code, "thoughts": thoughts}


def answer(text: str) -> dict[str, Any]:
    return {"answer": text}


def call(tool: str, thoughts: str = "", **arguments: Any) -> dict[str, Any]:
    return {"call": tool, "arguments": arguments, "thoughts": thoughts}


def calls(items: list[tuple[str, dict[str, Any]]], thoughts: str = "") -> ModelReply:
    """Several tool calls in one reply, as models do for independent steps."""
    return ModelReply(
        thoughts,
        tuple(ToolCallRequest(f"p{i}", name, args) for i, (name, args) in enumerate(items)),
    )


class Results:
    """The tool results a model has read so far in this run (newest last)."""

    def __init__(self, request: ModelRequest) -> None:
        self.texts = [m.text for m in request.messages if m.role == "tool"]

    def json(self, index: int = -1) -> Any:
        return json.loads(self.texts[index])

    def text(self, index: int = -1) -> str:
        """A text result; file servers wrap it as {"content": "..."}."""
        raw = self.texts[index]
        try:
            value = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(value, dict) and isinstance(value.get("content"), str):
            return str(value["content"])
        return raw


def then(fn: Callable[[Results], Step]) -> Callable[[ModelRequest], Step]:
    return lambda request: fn(Results(request))

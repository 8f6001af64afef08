"""How the model answers, and how results go back: native tools, a JSON envelope, fenced code.

Each format turns a ``ModelReply`` into actions and a result into the message the model reads
next. Native tool calling offers the tools ``search`` and ``execute`` (argument ``code``), as
the gateway does; a reply with no tool call ends the run only with a ``FINAL ANSWER:`` line
(prose alone, such as a plan the model forgot to act on, is a failed round with a correction).
The two text formats suit models without tool calling (small ones do better with fenced code).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass

from codemode.agent.actions import Action, Execute, Finish, Malformed, Search
from codemode.agent.parsing import MAX_REPLY_CHARS, final_answer, parse_envelope, parse_fenced
from codemode.agent.parsing import parse_search_arguments as _search_action
from codemode.agent.providers.base import Message, MessageKind, ModelReply, ToolDefinition
from codemode.settings.agent import OutputFormatName

__all__ = [
    "EXECUTE_TOOL",
    "LISTED_EXECUTE_TOOL",
    "SEARCH_TOOL",
    "FencedCode",
    "JsonEnvelope",
    "NativeTools",
    "OutputFormat",
    "Reading",
    "make_format",
]

SEARCH_TOOL = ToolDefinition(
    name="search",
    description=(
        "Find Python functions for your task among the available tools. Returns the best "
        "matches with signatures. detail: name, summary (default) or full (source with docs)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What you want to do"},
            "detail": {"type": "string", "enum": ["name", "summary", "full"]},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20},
        },
        "required": ["query"],
    },
)
EXECUTE_TOOL = ToolDefinition(
    name="execute",
    description=(
        "Run Python code in the sandbox (variables and files persist between runs). Tools are "
        "functions: `from servers import crm` then `crm.some_tool(...)`; a failed call raises "
        "ToolError. Only printed output comes back: print just what you need."
    ),
    input_schema={
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python to run"}},
        "required": ["code"],
    },
)
# When the prompt lists every function (a small catalog), search has nothing to add: the code
# can call help() on any of them.
LISTED_EXECUTE_TOOL = ToolDefinition(
    name="execute",
    description="Run Python in the sandbox; only printed output comes back.",
    input_schema=EXECUTE_TOOL.input_schema,
)


@dataclass(frozen=True, slots=True)
class Reading:
    thoughts: str
    actions: tuple[Action, ...]


class OutputFormat(ABC):
    name: OutputFormatName
    # The one-line reminder appended to every correction.
    reminder: str
    # True when the system prompt lists every function: no search is offered.
    listed: bool = False

    def for_catalog(self, *, listed: bool) -> OutputFormat:
        """This format for a catalog the prompt lists whole (``listed``) or one to search."""
        clone = copy.copy(self)
        clone.listed = listed
        return clone

    def tools(self) -> tuple[ToolDefinition, ...]:
        return ()

    @abstractmethod
    def instructions(self) -> str:
        """The part of the system prompt that explains how to answer."""

    @abstractmethod
    def read(self, reply: ModelReply) -> Reading: ...

    def assistant_message(self, reply: ModelReply) -> Message:
        return Message("assistant", reply.text, reply.tool_calls, kind="reply")

    def feedback(self, action: Action, text: str, *, is_error: bool = False) -> Message:
        kind: MessageKind = "correction" if isinstance(action, Malformed) else "result"
        return Message("user", text, kind=kind, is_error=is_error)


class NativeTools(OutputFormat):
    name: OutputFormatName = "tools"
    reminder = (
        "Call execute(code) or search(query); when the task is done, reply with no tool call "
        "and a line FINAL ANSWER: followed by the answer."
    )

    def tools(self) -> tuple[ToolDefinition, ...]:
        return (LISTED_EXECUTE_TOOL,) if self.listed else (SEARCH_TOOL, EXECUTE_TOOL)

    def instructions(self) -> str:
        if self.listed:
            return (
                "Plan in a line, then call execute(code). When done, reply without a tool call "
                "and a line FINAL ANSWER: followed by the answer."
            )
        return (
            "Work with the tools: search(query) finds functions, execute(code) runs Python. "
            "Write your plan as text before a tool call. When the task is done, reply with no "
            "tool call and a line FINAL ANSWER: followed by the answer: that ends the run."
        )

    def read(self, reply: ModelReply) -> Reading:
        if not reply.tool_calls:
            if len(reply.text) > MAX_REPLY_CHARS:
                return Reading("", (Malformed(f"the answer was {len(reply.text):,} characters"),))
            if (final := final_answer(reply.text)) is not None:
                return Reading(final[0], (Finish(final[1]),))
            if reply.text.strip():
                return Reading(
                    reply.text.strip(),
                    (Malformed("no tool call and no FINAL ANSWER: line, so nothing was done"),),
                )
            return Reading("", (Malformed("the answer was empty"),))
        actions: list[Action] = []
        for call in reply.tool_calls:
            arguments = call.arguments
            if arguments is None:
                actions.append(Malformed("the tool arguments were not a JSON object", call.id))
            elif call.name == "execute":
                code = arguments.get("code")
                if isinstance(code, str) and code.strip() and len(code) <= MAX_REPLY_CHARS:
                    actions.append(Execute(code, call.id))
                else:
                    actions.append(
                        Malformed('execute needs a "code" string of Python to run', call.id)
                    )
            elif call.name == "search":
                actions.append(_search_action(arguments, call.id))
            else:
                actions.append(
                    Malformed(
                        f"there is no tool {call.name[:60]!r}: use search or execute", call.id
                    )
                )
        return Reading(reply.text.strip(), tuple(actions))

    def feedback(self, action: Action, text: str, *, is_error: bool = False) -> Message:
        call_id = action.call_id if isinstance(action, Execute | Search | Malformed) else None
        if call_id is None:
            return super().feedback(action, text, is_error=is_error)
        kind: MessageKind = "correction" if isinstance(action, Malformed) else "result"
        return Message("tool", text, tool_call_id=call_id, kind=kind, is_error=is_error)


class JsonEnvelope(OutputFormat):
    name: OutputFormatName = "json"
    reminder = (
        'Answer with one JSON object: {"thoughts": "...", "code": "..."}, or "search": "..." '
        'to look up functions, or "answer": "..." when done.'
    )

    def instructions(self) -> str:
        if self.listed:
            return (
                'Answer with one JSON object only: {"thoughts": "your plan", "code": "Python to '
                'run"}, or when done {"thoughts": "...", "answer": "the final answer"}. Escape '
                "newlines in strings as \\n."
            )
        return (
            "Answer with exactly one JSON object and nothing else: "
            '{"thoughts": "your plan", "code": "the Python to run"}. To look up functions: '
            '{"thoughts": "...", "search": "what you need"}. When the task is done: '
            '{"thoughts": "...", "answer": "the final answer"}. Escape newlines in strings as \\n.'
        )

    def read(self, reply: ModelReply) -> Reading:
        thoughts, action = parse_envelope(reply.text)
        return Reading(thoughts, (action,))


class FencedCode(OutputFormat):
    name: OutputFormatName = "fenced"
    reminder = (
        "Write a short plan, then one ```python block to run, or a ```search block, or "
        "FINAL ANSWER: ... when done."
    )

    def instructions(self) -> str:
        if self.listed:
            return (
                "Write a short plan, then one ```python block to run. When done, write FINAL "
                "ANSWER: followed by the answer."
            )
        return (
            "Write a short plan, then exactly one ```python code block to run. To look up "
            "functions, write a ```search block with what you need instead. When the task is "
            "done, write FINAL ANSWER: followed by the answer."
        )

    def read(self, reply: ModelReply) -> Reading:
        thoughts, action = parse_fenced(reply.text)
        return Reading(thoughts, (action,))


def make_format(name: OutputFormatName | str) -> OutputFormat:
    formats: dict[str, type[OutputFormat]] = {
        "tools": NativeTools,
        "json": JsonEnvelope,
        "fenced": FencedCode,
    }
    try:
        return formats[name]()
    except KeyError:
        from codemode.errors import UsageError

        raise UsageError(
            f"unknown output format {name!r}", fix="use one of: tools, json, fenced"
        ) from None

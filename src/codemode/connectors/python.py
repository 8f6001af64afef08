"""Plain Python callables as tools: the schema comes from the signature, hints and docstring.

Sync functions run in a worker thread so a slow one cannot stall the event loop; a call from a
sandbox's code goes to that thread straight from the sandbox's own (``blocking_call``), not
through the loop. Arguments are validated (and coerced) by pydantic before the call; a function
that raises gives an error result, not an exception, as a failing MCP tool would.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, get_type_hints

from codemode.connectors.base import BaseConnector, BlockingCall
from codemode.errors import SchemaError, ToolNotFoundError
from codemode.tools import ToolResult, ToolSpec

__all__ = ["PythonConnector", "parse_docstring"]

_SECTION_RE = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Keyword Args|Returns?|Yields?|Raises|Examples?"
    r"|Notes?|See Also|Attributes)\s*:?\s*$"
)
# "name (type): text" (Google) or "name : type" (NumPy); group 2 is the colon with what precedes it.
_PARAM_RE = re.compile(r"^\s*\*{0,2}(\w+)(?:\s*\([^)]*\))?(\s*:)?\s*(.*)$")
_PARAM_SECTIONS = {"Args", "Arguments", "Parameters", "Params", "Keyword Args"}
#: What a tool function may raise and the call survive: its ``sys.exit()`` is its own failure,
#: not the gateway's exit (it would end the event loop or the sandbox's thread).
_FAILURES = (Exception, SystemExit)


@dataclass(frozen=True, slots=True)
class _Tool:
    spec: ToolSpec
    function: Callable[..., Any]
    arguments: Any  # a pydantic model class


class PythonConnector(BaseConnector):
    """Expose Python callables as the tools of server ``name``.

    ``functions`` is a list of callables (named after ``__name__``) or a mapping of tool name to
    callable.
    """

    def __init__(
        self,
        name: str,
        functions: Iterable[Callable[..., Any]] | Mapping[str, Callable[..., Any]],
    ) -> None:
        self.name = name
        items = (
            list(functions.items())
            if isinstance(functions, Mapping)
            else [(_callable_name(fn), fn) for fn in functions]
        )
        self._tools: dict[str, _Tool] = {}
        for tool_name, function in items:
            if not callable(function):
                raise SchemaError(
                    f"{name}.{tool_name} is {type(function).__name__}, not a function",
                    fix="list only functions (sync or async) in the python server's attribute",
                )
            if tool_name in self._tools:
                raise SchemaError(
                    f"two functions named {tool_name!r} in python server {name!r}",
                    fix="rename one, or pass a mapping of tool name to function",
                )
            self._tools[tool_name] = _build_tool(name, tool_name, function)

    async def list_tools(self) -> list[ToolSpec]:
        return [tool.spec for tool in self._tools.values()]

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        entry = self._entry(tool)
        kwargs = self._kwargs(entry, tool, arguments)
        if isinstance(kwargs, ToolResult):
            return kwargs
        try:
            if inspect.iscoroutinefunction(entry.function):
                value = await entry.function(**kwargs)
            else:
                value = await asyncio.to_thread(entry.function, **kwargs)
                if inspect.isawaitable(value):
                    value = await value
        except _FAILURES as error:  # a failing function is a tool error
            return _failed(error)
        return _result(value)

    def blocking_call(self, tool: str) -> BlockingCall | None:
        """A sync function's call, run where it is called (its caller is a worker thread);
        None for an async function or a tool it does not have (``call_tool`` says so)."""
        entry = self._tools.get(tool)
        if entry is None or inspect.iscoroutinefunction(entry.function):
            return None
        function = entry.function

        def call(arguments: dict[str, Any]) -> ToolResult | Awaitable[ToolResult]:
            kwargs = self._kwargs(entry, tool, arguments)
            if isinstance(kwargs, ToolResult):
                return kwargs
            try:
                value = function(**kwargs)
            except _FAILURES as error:  # a failing function is a tool error
                return _failed(error)
            if inspect.isawaitable(value):  # a coroutine: awaited on the loop, as before
                return _awaited(value)
            return _result(value)

        return call

    def _entry(self, tool: str) -> _Tool:
        entry = self._tools.get(tool)
        if entry is None:
            raise ToolNotFoundError(
                f"python server {self.name!r} has no tool {tool!r}",
                fix=f"use one of: {', '.join(sorted(self._tools))}",
            )
        return entry

    def _kwargs(
        self, entry: _Tool, tool: str, arguments: dict[str, Any]
    ) -> dict[str, Any] | ToolResult:
        """The function's keyword arguments, validated (and coerced); an error result else."""
        from pydantic import ValidationError

        try:
            model = entry.arguments.model_validate(arguments)
        except ValidationError as error:
            return ToolResult(
                value=None,
                is_error=True,
                error_message=f"invalid arguments for {self.name}.{tool}: {error}",
            )
        return {field: getattr(model, field) for field in entry.arguments.model_fields}


async def _awaited(value: Awaitable[Any]) -> ToolResult:
    try:
        return _result(await value)
    except _FAILURES as error:  # a failing function is a tool error
        return _failed(error)


def _failed(error: BaseException) -> ToolResult:
    return ToolResult(value=None, is_error=True, error_message=f"{type(error).__name__}: {error}")


def _result(value: Any) -> ToolResult:
    from pydantic_core import to_jsonable_python

    return ToolResult(value=to_jsonable_python(value, fallback=repr))


def _callable_name(function: Callable[..., Any]) -> str:
    name = getattr(function, "__name__", None)
    if not isinstance(name, str) or name == "<lambda>":
        raise SchemaError(
            f"cannot name the tool for {function!r}",
            fix="use a named function, or pass a mapping of tool name to function",
        )
    return name


def _build_tool(server: str, tool_name: str, function: Callable[..., Any]) -> _Tool:
    from pydantic import ConfigDict, Field, TypeAdapter, create_model

    signature = inspect.signature(function)
    try:
        hints = get_type_hints(function)
    except Exception as error:
        raise SchemaError(
            f"cannot read the type hints of {server}.{tool_name}: {error}",
            fix="make every annotation importable at module level",
        ) from error
    summary, param_docs = parse_docstring(inspect.getdoc(function) or "")
    fields: dict[str, Any] = {}
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (
            annotation,
            Field(default, description=param_docs.get(parameter.name)),
        )
    try:
        model = create_model(
            f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = model.model_json_schema()
    except Exception as error:
        raise SchemaError(
            f"cannot build a schema for {server}.{tool_name}: {error}",
            fix="use JSON-friendly parameter types (on Python 3.11, typing_extensions.TypedDict)",
        ) from error
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    output_schema = None
    returns = hints.get("return", inspect.Signature.empty)
    if returns not in (inspect.Signature.empty, Any, None, type(None)):
        try:
            output_schema = TypeAdapter(returns).json_schema(mode="serialization")
        except Exception:  # noqa: BLE001 - no output schema for odd return types
            output_schema = None
    spec = ToolSpec(
        server=server,
        name=tool_name,
        description=summary,
        input_schema=schema,
        output_schema=output_schema,
        source="python",
    )
    return _Tool(spec=spec, function=function, arguments=model)


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google- or NumPy-style docstring into its description and parameter docs."""
    lines = doc.expandtabs().splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    base_indent: int | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        header = _SECTION_RE.match(line)
        underline = index + 1 < len(lines) and set(lines[index + 1].strip()) == {"-"}
        if header and (line.rstrip().endswith(":") or underline):
            section, current, base_indent = header.group(1), None, None
            index += 2 if underline else 1
            continue
        if section is None:
            summary.append(line)
        elif section in _PARAM_SECTIONS and line.strip():
            indent = len(line) - len(line.lstrip())
            if base_indent is None:
                base_indent = indent
            entry = _PARAM_RE.match(line) if indent <= base_indent else None
            if entry:
                current = entry.group(1)
                numpy_style = entry.group(2) is not None and entry.group(2).startswith(" ")
                params[current] = "" if numpy_style else (entry.group(3) or "").strip()
            elif current is not None:
                params[current] = f"{params[current]} {line.strip()}".strip()
        index += 1
    return "\n".join(summary).strip(), params

"""Errors Python raises about the tools' names, made to say what was meant.

``check_calls`` loses track of a tool bound to a variable it cannot follow (``q =
sqlite.read_query``); Python then raises ``TypeError: read_query() got an unexpected keyword
argument 'sql'`` with no hint. ``explain_call_error`` adds the "did you mean" and the keywords
the generated function takes, from the same signatures the check uses.

``explain_key_error``: code that guesses a field of a tool's result (``row['value']``) gets
``KeyError: 'value'``; when a tool the execution called declares a field close to it in its
output schema, the error names it and the result's fields, so no round is spent printing them.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator
from typing import Any

from codemode.checks.signatures import SignatureTable, ToolSignature
from codemode.sandbox.result import ExecutionResult
from codemode.tools import ToolSpec

__all__ = ["explain_call_error", "explain_errors", "explain_key_error", "result_fields"]

_UNEXPECTED = re.compile(r"\b(\w+)\(\) got an unexpected keyword argument '(\w+)'")
_MISSING_KEY = re.compile(r"'([^'\\]{1,100})'")
_LISTED = 8
_FIELDS_LISTED = 16
_SCHEMA_DEPTH = 6


def explain_errors(
    result: ExecutionResult,
    table: SignatureTable,
    specs: Callable[[str, str], ToolSpec | None],
) -> None:
    """``explain_call_error`` and ``explain_key_error``, in place."""
    explain_call_error(result, table)
    explain_key_error(result, specs)


def explain_call_error(result: ExecutionResult, table: SignatureTable) -> None:
    """Add to ``result``'s error what the misnamed keyword was meant to be (in place)."""
    error = result.error
    if not error or error.get("type") != "TypeError":
        return
    message = str(error.get("message") or "")
    found = _UNEXPECTED.search(message)
    if found is None:
        return
    function, keyword = found.groups()
    tools = [
        sig for tools in table.servers.values() for name, sig in tools.items() if name == function
    ]
    notes = {_note(sig, keyword) for sig in tools}
    if len(notes) == 1:  # the same advice whichever server's tool it was
        error["message"] = message + notes.pop()


def _note(signature: ToolSignature, keyword: str) -> str:
    options = sorted(signature.params)
    if not options:
        return f"; {signature.function}() takes no arguments"
    close = difflib.get_close_matches(keyword, options, n=1, cutoff=0.6)
    meant = close[0] if close else signature.required[0] if len(signature.required) == 1 else None
    takes = ", ".join(options[:_LISTED]) + (", ..." if len(options) > _LISTED else "")
    guess = f"; did you mean {meant!r}?" if meant else ""
    return f"{guess} ({signature.function}() takes {takes})"


def explain_key_error(
    result: ExecutionResult, specs: Callable[[str, str], ToolSpec | None]
) -> None:
    """Add to a ``KeyError``'s message the field of a called tool's result it was likely meant
    to be, and that result's fields (in place)."""
    error = result.error
    if not error or error.get("type") != "KeyError":
        return
    found = _MISSING_KEY.fullmatch(str(error.get("message") or "").strip())
    if found is None:
        return
    key = found.group(1)
    for name in result.tool_calls.get("by_tool") or {}:
        server, _, tool = str(name).partition(".")
        spec = specs(server, tool)
        fields = result_fields(spec.output_schema) if spec is not None else []
        if key in fields:
            continue
        close = difflib.get_close_matches(key, fields, n=1, cutoff=0.6)
        if close:
            shown = ", ".join(fields[:_FIELDS_LISTED]) + (
                ", ..." if len(fields) > _FIELDS_LISTED else ""
            )
            error["message"] = (
                f"{error['message']}; did you mean {close[0]!r}? ({name}'s result has: {shown})"
            )
            return


def result_fields(schema: dict[str, Any] | None) -> list[str]:
    """Every property name in an output schema (nested objects and list items too, ``$ref``s
    into its ``$defs`` followed), each once, outermost first."""
    if not isinstance(schema, dict):
        return []
    definitions = schema.get("$defs") or schema.get("definitions") or {}
    return list(dict.fromkeys(_properties(schema, definitions, 0)))


def _properties(schema: Any, definitions: dict[str, Any], depth: int) -> Iterator[str]:
    if not isinstance(schema, dict) or depth > _SCHEMA_DEPTH:
        return
    reference = schema.get("$ref")
    if isinstance(reference, str) and "/" in reference:
        yield from _properties(definitions.get(reference.rsplit("/", 1)[1]), definitions, depth + 1)
        return
    properties = schema.get("properties")
    nested: list[Any] = []
    if isinstance(properties, dict):
        for name, value in properties.items():
            yield str(name)
            nested.append(value)
    nested.append(schema.get("items"))
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list):
            nested += options
    for child in nested:
        yield from _properties(child, definitions, depth + 1)

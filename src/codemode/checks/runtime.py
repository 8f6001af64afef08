"""A call the static check could not follow that failed on a keyword: the error says which.

``check_calls`` loses track of a tool bound to a variable it cannot follow (``q =
sqlite.read_query``); Python then raises ``TypeError: read_query() got an unexpected keyword
argument 'sql'`` with no hint. ``explain_call_error`` adds the "did you mean" and the keywords
the generated function takes, from the same signatures the check uses.
"""

from __future__ import annotations

import difflib
import re

from codemode.checks.signatures import SignatureTable, ToolSignature
from codemode.sandbox.result import ExecutionResult

__all__ = ["explain_call_error"]

_UNEXPECTED = re.compile(r"\b(\w+)\(\) got an unexpected keyword argument '(\w+)'")
_LISTED = 8


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

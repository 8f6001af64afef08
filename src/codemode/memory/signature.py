"""An error's signature: what stays the same when the same mistake happens again.

The type, the message with its variable parts blanked (numbers, quoted text, ids), and the tool
or module involved. Two failures with one signature are "the same error" for the fix memory.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["error_signature"]

_QUOTED = re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")
_TOKEN = re.compile(r"\b[A-Za-z]*_?[0-9a-f]{8,}\b|\b[A-Z]{2,}-\d+\b|<[A-Z_]+_\d+>")
_SPACE = re.compile(r"\s+")
_TOOL = re.compile(r"^([A-Za-z_][\w-]*\.[A-Za-z_]\w*)[:\s]")
_MODULE = re.compile(r"No module named '([^']+)'")


def error_signature(error: dict[str, Any] | None) -> str | None:
    """``type | shape of the message | tool or module``, or None when there is no error."""
    if not error:
        return None
    kind = str(error.get("type") or "Error")
    message = str(error.get("message") or "")
    involved = ""
    if match := _TOOL.match(message):
        involved = match.group(1)
    elif match := _MODULE.search(message):
        involved = match.group(1).split(".")[0] if match.group(1).startswith("servers.") else ""
        involved = match.group(1)
    shape = _QUOTED.sub("'…'", message[:300])
    shape = _TOKEN.sub("…", shape)
    shape = _NUMBER.sub("N", shape)
    shape = _SPACE.sub(" ", shape).strip()
    return f"{kind} | {shape} | {involved}"

"""Search answers as the model reads them, at three detail levels.

``name``: ``module.function`` per line. ``summary`` (default): the one-line signature and the
first sentence of the description. ``full``: the generated stub module of each tool (its Python
source with the whole docstring). Every answer starts with how to import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, get_args

from codemode.errors import UsageError
from codemode.search.hit import Hit

__all__ = ["DEFAULT_DETAIL", "Detail", "SourceLookup", "check_detail", "render_answer"]

Detail = Literal["name", "summary", "full"]
DEFAULT_DETAIL: Detail = "summary"
DETAILS: tuple[str, ...] = get_args(Detail)
# (server, tool) -> the stub module's source, e.g. ``StubLibrary(specs).tool_source``.
SourceLookup = Callable[[str, str], str]


def check_detail(value: str) -> Detail:
    if value not in DETAILS:
        raise UsageError(f"unknown detail level {value!r}", fix=f"use one of: {', '.join(DETAILS)}")
    return value  # type: ignore[return-value]


def _header(hits: Sequence[Hit]) -> str:
    modules = ", ".join(dict.fromkeys(hit.module for hit in hits))
    return f"from servers import {modules}"


def render_answer(
    hits: Sequence[Hit], detail: Detail = DEFAULT_DETAIL, *, source: SourceLookup | None = None
) -> str:
    """The text returned to the model for ``hits`` (best first)."""
    if not hits:
        return "No matching tools. Try other words, e.g. the resource and the action."
    lines = [_header(hits)]
    if detail == "name":
        lines += [hit.python_name for hit in hits]
    elif detail == "summary" or source is None:
        for hit in hits:
            lines.append(f"{hit.module}.{hit.signature}")
            if hit.summary:
                lines.append(f"  {hit.summary}")
    else:
        for hit in hits:
            lines.append(f"# {hit.python_name}")
            lines.append(source(hit.server, hit.tool).rstrip())
    return "\n".join(lines)

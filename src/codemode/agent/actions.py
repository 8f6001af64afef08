"""What a model's reply asks for: search the tool API, execute code, finish, or nothing usable
(and, for the tool-calling baseline, a call to one upstream tool)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from codemode.search.render import DEFAULT_HEAD as DEFAULT_LIMIT

__all__ = ["Action", "Call", "Execute", "Finish", "Malformed", "Search"]


@dataclass(frozen=True, slots=True)
class Search:
    query: str
    detail: str = "summary"
    limit: int = DEFAULT_LIMIT
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Execute:
    code: str
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Call:
    """The baseline's action: one upstream tool, called directly with these arguments."""

    tool: str
    arguments: dict[str, Any]
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Finish:
    answer: str


@dataclass(frozen=True, slots=True)
class Malformed:
    """An answer the loop could not use; ``problem`` says what was wrong in one line."""

    problem: str
    call_id: str | None = None


Action = Search | Execute | Call | Finish | Malformed

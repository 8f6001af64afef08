"""Token counts (o200k, offline through ``toktok``) and the ledger: what a catalog would cost as
plain MCP tools, against codemode's fixed two-tool surface and a typical search answer."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from codemode.tools import ToolSpec

__all__ = [
    "ENCODING",
    "REPRESENTATIVE_QUERIES",
    "LedgerRow",
    "build_ledger",
    "count_tokens",
    "count_tokens_many",
    "mcp_tool_definition",
    "surface_tokens",
]

ENCODING = "o200k_base"
# Generic tasks: the answer's size matters here, not its quality.
REPRESENTATIVE_QUERIES = (
    "list all items",
    "create a new one",
    "delete it",
    "update the settings",
    "get details by id",
)


def count_tokens_many(texts: Sequence[str], encoding: str = ENCODING) -> list[int]:
    import toktok

    return [int(n) for n in toktok.batch_count(list(texts), encoding)]


def count_tokens(text: str, encoding: str = ENCODING) -> int:
    return count_tokens_many([text], encoding)[0]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def mcp_tool_definition(spec: ToolSpec) -> dict[str, Any]:
    """The tool as an MCP client lists it to a model: name, description, inputSchema."""
    return {"name": spec.name, "description": spec.description, "inputSchema": spec.input_schema}


def surface_tokens() -> int:
    """codemode's whole tool surface: the ``search`` and ``execute`` definitions."""
    from codemode.gateway.meta_tools import tool_definitions

    return count_tokens(_dumps(tool_definitions()))


@dataclass(frozen=True, slots=True)
class LedgerRow:
    source: str
    tools: int
    tool_definition_tokens: int
    surface_tokens: int
    search_answer_tokens: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _answer_tokens(specs: Sequence[ToolSpec], queries: Sequence[str]) -> int:
    """Median tokens of the top-5 answer at the default detail, over ``queries``."""
    from codemode.search.base import DEFAULT_LIMIT
    from codemode.search.fts import FtsIndex
    from codemode.search.render import DEFAULT_DETAIL, render_answer

    if not specs:
        return 0
    index = FtsIndex()
    index.add(specs)
    answers = [render_answer(index.search(q, DEFAULT_LIMIT), DEFAULT_DETAIL) for q in queries]
    return int(statistics.median(count_tokens_many(answers)))


def build_ledger(
    specs: Iterable[ToolSpec], queries: Sequence[str] = REPRESENTATIVE_QUERIES
) -> list[LedgerRow]:
    """One row per server (in first-seen order), then a ``total`` row."""
    specs = list(specs)
    by_source: dict[str, list[ToolSpec]] = {}
    for spec in specs:
        by_source.setdefault(spec.server, []).append(spec)
    definitions = count_tokens_many([_dumps(mcp_tool_definition(s)) for s in specs])
    per_tool = dict(zip((id(s) for s in specs), definitions, strict=True))
    surface = surface_tokens()
    rows = [
        LedgerRow(
            source=source,
            tools=len(group),
            tool_definition_tokens=sum(per_tool[id(s)] for s in group),
            surface_tokens=surface,
            search_answer_tokens=_answer_tokens(group, queries),
        )
        for source, group in by_source.items()
    ]
    rows.append(
        LedgerRow(
            source="total",
            tools=len(specs),
            tool_definition_tokens=sum(definitions),
            surface_tokens=surface,
            search_answer_tokens=_answer_tokens(specs, queries),
        )
    )
    return rows

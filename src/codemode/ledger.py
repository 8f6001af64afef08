"""The token ledger: what a catalog would cost as plain MCP tools, against codemode's fixed
tool surface (``search``, ``execute``, ``approve``) and a typical search answer (``codemode
tokens``)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from codemode.tokens import count_tokens, count_tokens_many
from codemode.tools import ToolSpec

if TYPE_CHECKING:
    from codemode.sandbox.result import ExecutionResult

__all__ = [
    "REPRESENTATIVE_QUERIES",
    "LedgerRow",
    "build_ledger",
    "execute_tokens",
    "mcp_tool_definition",
    "surface_tokens",
]

# Generic tasks: the answer's size matters here, not its quality.
REPRESENTATIVE_QUERIES = (
    "list all items",
    "create a new one",
    "delete it",
    "update the settings",
    "get details by id",
)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def mcp_tool_definition(spec: ToolSpec) -> dict[str, Any]:
    """The tool as an MCP client lists it to a model: name, description, inputSchema."""
    return {"name": spec.name, "description": spec.description, "inputSchema": spec.input_schema}


def surface_tokens() -> int:
    """codemode's whole tool surface: the definitions of ``search``, ``execute`` and
    ``approve``."""
    from codemode.gateway.meta_tools import tool_definitions

    return count_tokens(_dumps(tool_definitions()))


@dataclass(frozen=True, slots=True)
class LedgerRow:
    source: str
    tools: int
    tool_definition_tokens: int
    surface_tokens: int
    search_answer_tokens: int
    # The same answers' structured content (what a client that hands it to the model pays).
    search_structured_tokens: int = 0
    # A typical ``execute`` answer (any catalog): its text and its structured content.
    execute_text_tokens: int = 0
    execute_structured_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _answer_tokens(specs: Sequence[ToolSpec], queries: Sequence[str]) -> tuple[int, int]:
    """Median tokens of the search tool's default answer over ``queries`` (the best few with
    signatures, more by name): its text, and its structured content."""
    from codemode.gateway.structured import search_structured
    from codemode.search.fts import FtsIndex
    from codemode.search.render import DEFAULT_DETAIL, DEFAULT_HEAD, answer_size, render_answer

    if not specs:
        return 0, 0
    index = FtsIndex()
    index.add(specs)
    found = [index.search(q, answer_size(q, DEFAULT_DETAIL, DEFAULT_HEAD)) for q in queries]
    texts = [render_answer(hits, DEFAULT_DETAIL, head=DEFAULT_HEAD) for hits in found]
    data = [
        _dumps(
            search_structured(
                [hit.to_json() for hit in hits[:DEFAULT_HEAD]],
                DEFAULT_DETAIL,
                more=[hit.python_name for hit in hits[DEFAULT_HEAD:]],
            )
        )
        for hits in found
    ]
    return (
        int(statistics.median(count_tokens_many(texts))),
        int(statistics.median(count_tokens_many(data))),
    )


def execute_tokens(result: ExecutionResult | None = None) -> tuple[int, int]:
    """(text, structured content) tokens of an ``execute`` answer; by default a typical one:
    a few printed lines after two tool calls, in a session."""
    from codemode.sandbox.result import ExecutionResult, make_hint

    if result is None:
        result = ExecutionResult(
            status="ok",
            exit_code=0,
            stdout="3 open invoices\ntotal due: 1,240.50 EUR\noldest: INV-0142 (2024-05-02)\n",
            stderr="",
            error=None,
            files={"created": [], "modified": [], "deleted": []},
            tool_calls={
                "count": 2,
                "failures": 0,
                "by_tool": {"billing.list_invoices": {"calls": 2, "failures": 0}},
            },
            duration_ms=41.237,
            truncated={
                "stdout_bytes": 0,
                "stderr_bytes": 0,
                "stdout_total_bytes": 70,
                "stderr_total_bytes": 0,
            },
            hint="",
            session="s_" + "x" * 24,
            workspace_bytes=0,
        )
        result.hint = make_hint(result, 30.0)
    text, data = count_tokens_many([result.render_text(), _dumps(result.to_structured())])
    return text, data


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
    execute = execute_tokens()
    rows = [
        LedgerRow(
            source,
            len(group),
            sum(per_tool[id(s)] for s in group),
            surface,
            *_answer_tokens(group, queries),
            *execute,
        )
        for source, group in by_source.items()
    ]
    total = _answer_tokens(specs, queries)
    rows.append(LedgerRow("total", len(specs), sum(definitions), surface, *total, *execute))
    return rows

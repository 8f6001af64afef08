"""``codemode search QUERY``: find tools in the configured servers and given OpenAPI specs."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from codemode.cli.options import add_catalog_arguments

if TYPE_CHECKING:
    from codemode.search.render import SourceLookup
    from codemode.tools import ToolSpec

__all__ = ["HELP", "add_arguments", "run"]

HELP = "Search the tool catalog (configured servers and --openapi specs) for a task."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", help="what you want to do, in words")
    add_catalog_arguments(parser)
    parser.add_argument("--detail", choices=("name", "summary", "full"), default="summary")
    parser.add_argument("--limit", type=int, default=5, metavar="K")
    parser.add_argument("--json", action="store_true", help="print hits as JSON, best first")
    parser.add_argument(
        "--no-semantic", action="store_true", help="lexical search only (no embedding model)"
    )


def _stub_source(specs: list[ToolSpec]) -> SourceLookup:
    from codemode.stubs import StubLibrary

    return StubLibrary(specs).tool_source


def run(args: argparse.Namespace) -> int:
    from codemode.cli.options import load_specs
    from codemode.errors import UsageError
    from codemode.search.render import check_detail, render_answer
    from codemode.search.semantic import build_index

    if args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}", fix="pass --limit 5")
    detail = check_detail(args.detail)
    specs = load_specs(args)
    index = build_index(specs, semantic=False if args.no_semantic else None)
    hits = index.search(args.query, args.limit)
    if args.json:
        print(json.dumps([hit.to_json() for hit in hits], indent=1, ensure_ascii=False))
        return 0
    source = _stub_source(specs) if detail == "full" else None
    print(render_answer(hits, detail, source=source))
    return 0

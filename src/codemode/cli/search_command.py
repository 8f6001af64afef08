"""``codemode search QUERY``: find tools in the configured servers and given OpenAPI specs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codemode.search.render import SourceLookup
    from codemode.tools import ToolSpec

__all__ = ["HELP", "add_arguments", "load_specs", "run"]

HELP = "Search the tool catalog (configured servers and --openapi specs) for a task."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", help="what you want to do, in words")
    parser.add_argument("--config", type=Path, help="codemode.toml or mcpServers JSON")
    parser.add_argument(
        "--openapi",
        type=Path,
        action="append",
        default=[],
        metavar="SPEC",
        help="add an OpenAPI spec (JSON/YAML, may be gzipped); its server is named after the file",
    )
    parser.add_argument("--detail", choices=("name", "summary", "full"), default="summary")
    parser.add_argument("--limit", type=int, default=5, metavar="K")
    parser.add_argument("--json", action="store_true", help="print hits as JSON, best first")
    parser.add_argument(
        "--no-semantic", action="store_true", help="lexical search only (no embedding model)"
    )


def load_specs(config: Path | None, openapi: list[Path]) -> list[ToolSpec]:
    """Every tool of the catalog that ``--config`` and ``--openapi`` describe."""
    import anyio

    from codemode.catalog.loading import open_catalog

    async def collect() -> list[ToolSpec]:
        catalog = await open_catalog(config, openapi)
        try:
            return catalog.specs()
        finally:
            await catalog.aclose()

    return anyio.run(collect)


def _stub_source(specs: list[ToolSpec]) -> SourceLookup:
    from codemode.stubs import StubLibrary

    return StubLibrary(specs).tool_source


def run(args: argparse.Namespace) -> int:
    import logging

    from codemode.errors import UsageError
    from codemode.search.render import check_detail, render_answer
    from codemode.search.semantic import build_index

    if args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}", fix="pass --limit 5")
    detail = check_detail(args.detail)
    logging.basicConfig(format="codemode: %(message)s", level=logging.WARNING)
    specs = load_specs(args.config, args.openapi)
    index = build_index(specs, semantic=False if args.no_semantic else None)
    hits = index.search(args.query, args.limit)
    if args.json:
        print(json.dumps([hit.to_json() for hit in hits], indent=1, ensure_ascii=False))
        return 0
    source = _stub_source(specs) if detail == "full" else None
    print(render_answer(hits, detail, source=source))
    return 0

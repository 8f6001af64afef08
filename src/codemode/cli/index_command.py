"""``codemode index build``: build the search index ahead, so ``serve`` and ``search`` start ready.

It loads the catalog that ``--config`` and ``--openapi`` describe, builds the index (the keyword
table, then the tool vectors when semantic search is installed: minutes for thousands of tools on
a first build), printing each stage and its percentage on stderr, and stores it under the cache
directory by catalog fingerprint (``codemode.search.store``): ``codemode serve`` with the same
servers opens it at start, and ``codemode search`` with the same inputs answers from it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from codemode.cli.options import add_catalog_arguments

__all__ = ["HELP", "add_arguments", "run"]

HELP = "build the search index ahead of serve/search (stage and percentage on stderr)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = actions.add_parser("build", help="build and store the index for these tools")
    add_catalog_arguments(build)
    build.add_argument(
        "--no-semantic", action="store_true", help="the lexical index only (no embedding model)"
    )
    build.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    import anyio

    from codemode.catalog.loading import catalog_from_config
    from codemode.cli.options import check_loaded, load_cli_config
    from codemode.cli.search_command import input_key, remember_search_inputs
    from codemode.search.progress import StageLines
    from codemode.search.semantic import HybridIndex, build_index
    from codemode.search.store import catalog_fingerprint, default_cache_dir
    from codemode.tools import ToolSpec

    config = load_cli_config(args.config, demo_allowed=not args.openapi)

    async def load() -> tuple[list[ToolSpec], dict[str, str]]:
        catalog = catalog_from_config(config, args.openapi)
        try:
            failures = await catalog.load()
            check_loaded({**config.server_problems, **failures}, allow_partial=args.allow_partial)
            return catalog.specs(), failures
        finally:
            await catalog.aclose()

    specs, failures = anyio.run(load)
    started = time.monotonic()
    index = build_index(
        specs, semantic=False if args.no_semantic else None, progress=StageLines(sys.stderr)
    )
    took = time.monotonic() - started
    fingerprint = catalog_fingerprint(specs)
    key = input_key(args.config, args.openapi)
    if key is not None and not failures:
        remember_search_inputs(key, fingerprint, config, args.openapi)
    summary = {
        "tools": len(specs),
        "semantic": isinstance(index, HybridIndex),
        "fingerprint": fingerprint,
        "directory": str(default_cache_dir() / "search" / fingerprint),
        "seconds": round(took, 2),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        kind = "semantic + lexical" if summary["semantic"] else "lexical only"
        print(f"search index ready: {len(specs)} tools, {kind}, in {summary['directory']}")
    return 0

"""``codemode tokens``: the token ledger of the catalog (plain MCP tools against codemode)."""

from __future__ import annotations

import argparse
import json

from codemode.cli.options import add_catalog_arguments

__all__ = ["HELP", "add_arguments", "run"]

HELP = "Count tokens: tools as plain MCP definitions vs codemode's surface and search answers."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_catalog_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print rows as JSON")


def run(args: argparse.Namespace) -> int:
    from codemode.cli.options import load_specs
    from codemode.tokens import build_ledger

    rows = build_ledger(load_specs(args))
    if args.json:
        print(json.dumps({row.source: row.to_json() for row in rows}, indent=1))
        return 0
    print(
        f"{'source':<36} {'tools':>6} {'as MCP tools':>13} {'codemode':>9} {'answer':>7} "
        f"{'(data)':>7}"
    )
    for row in rows:
        print(
            f"{row.source:<36} {row.tools:>6} {row.tool_definition_tokens:>13,} "
            f"{row.surface_tokens:>9,} {row.search_answer_tokens:>7,} "
            f"{row.search_structured_tokens:>7,}"
        )
    last = rows[-1]
    print(
        f"execute answer (typical): text {last.execute_text_tokens:,}, "
        f"structured {last.execute_structured_tokens:,}"
    )
    print("o200k tokens. codemode = its tool surface (search, execute, approve), any catalog;")
    print("answer = median default search answer (the best few with signatures, more by name);")
    print("(data) = its structured content, which some clients hand to the model as well.")
    return 0

"""``codemode demo``: the seed scenario end to end through the gateway, with a token ledger."""

from __future__ import annotations

import argparse

HELP = "run the built-in scenario through the MCP gateway and print the token ledger"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the ledgers as JSON")


def run(args: argparse.Namespace) -> int:
    import json
    import sys
    from dataclasses import asdict

    import anyio

    from codemode.demo.scenario import run_demo

    def progress(message: str) -> None:
        print(message, file=sys.stderr if args.json else sys.stdout, flush=True)

    print(
        "codemode demo: the agent code below is fixed (no model, no API key needed).",
        file=sys.stderr if args.json else sys.stdout,
    )
    ledgers = anyio.run(lambda: run_demo(progress))
    if args.json:
        print(
            json.dumps([asdict(ledger) | {"saving": ledger.saving} for ledger in ledgers], indent=2)
        )
        return 0
    for ledger in ledgers:
        print()
        print(ledger.render())
    return 0

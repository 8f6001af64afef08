"""``codemode paths``: where the config, state and caches of this installation live."""

from __future__ import annotations

import argparse
import json
import sys

from codemode.cli.options import add_config_argument

__all__ = ["HELP", "add_arguments", "run"]

HELP = "show where the config, state (audit log, caches) and demo data live"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from codemode.cli.locations import installation_paths

    entries = installation_paths(args.config)
    if args.json:
        document = {entry.name: asdict(entry) | {"exists": entry.exists} for entry in entries}
        print(json.dumps(document, indent=2))
        return 0
    for entry in entries:
        where = entry.path or "-"
        note = "" if entry.exists or not entry.path else "  (not created yet)"
        print(f"{entry.name:<12} {where}{note}")
    if entries[0].path == "":
        print("codemode: no config file: the built-in demo servers are used", file=sys.stderr)
    return 0

"""``codemode`` command line: one module per command, ``main(argv) -> int`` for tests.

Each command module defines ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int`` and
keeps its heavy imports inside ``run`` so that ``codemode --help`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from codemode.errors import CodemodeError

__all__ = ["main", "run"]

COMMANDS = ("serve", "exec", "run", "search", "stubs", "tokens", "audit", "demo")


def _command_module(name: str) -> ModuleType:
    return importlib.import_module(f"codemode.cli.{name}_command")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codemode",
        description="Agents use tools by writing code: search tool APIs, run code in a sandbox.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = _command_module(name)
        sub = commands.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args._module.run(args)
    except CodemodeError as error:
        print(f"codemode: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


def run() -> None:
    sys.exit(main())

"""``codemode`` command line: one module per command, ``main(argv) -> int`` for tests.

Each command module defines ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int`` and
keeps its heavy imports inside ``run`` so that ``codemode --help`` starts fast. Exit statuses
are in ``codemode.cli.exit_codes``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from codemode.cli.exit_codes import ExitCode, for_error
from codemode.cli.options import add_logging_arguments, configure_logging
from codemode.errors import CodemodeError

__all__ = ["COMMANDS", "build_parser", "main", "run"]

COMMANDS = (
    "serve",
    "exec",
    "search",
    "stubs",
    "tokens",
    "audit",
    "demo",
    "doctor",
    "paths",
    "install",
    "completion",
    "skills",
    "run",
    "model",
    "index",
)


def _command_module(name: str) -> ModuleType:
    return importlib.import_module(f"codemode.cli.{name}_command")


def _version() -> str:
    from codemode import __version__

    return f"codemode {__version__}"


class _VersionAction(argparse.Action):
    """``--version``, with the package metadata read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(_version())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codemode",
        description="Agents use tools by writing code: search tool APIs, run code in a sandbox.",
        epilog="Exit statuses: `codemode exec --help` lists them.",
    )
    parser.add_argument("--version", action=_VersionAction)
    add_logging_arguments(parser, suppress=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = _command_module(name)
        sub = commands.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        add_logging_arguments(sub, suppress=True)
        sub.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args)
    try:
        code: int = args._module.run(args)
    except CodemodeError as error:
        print(f"codemode: error: {error}", file=sys.stderr)
        return for_error(error)
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    return code


def run() -> None:
    sys.exit(main())

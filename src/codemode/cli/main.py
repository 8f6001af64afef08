"""``codemode`` command line: one module per command, ``main(argv) -> int`` for tests.

Each command module defines ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int`` and
keeps its heavy imports inside ``run`` so that ``codemode --help`` starts fast. Exit statuses
are in ``codemode.cli.exit_codes``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from codemode.cli.exit_codes import ExitCode, for_error
from codemode.cli.options import add_logging_arguments, configure_logging
from codemode.errors import CodemodeError

__all__ = ["COMMANDS", "build_parser", "main", "run"]

# Each command's one-line help, here so that ``codemode --help`` imports no command module
# (a test pins that they match the modules' own ``HELP``).
COMMANDS: dict[str, str] = {
    "serve": "serve the search and execute tools over MCP (stdio or streamable HTTP)",
    "exec": "run Python code in a fresh sandbox, with the configured tools importable from "
    "`servers`",
    "search": "Search the tool catalog (configured servers and --openapi specs) for a task.",
    "stubs": "Write the typed Python API (the `servers` package) for the configured tools to "
    "OUTDIR.",
    "tokens": "Count tokens: tools as plain MCP definitions vs codemode's surface and search "
    "answers.",
    "audit": "show the audit log of tool calls (who called what, the decision and the outcome)",
    "demo": "run the built-in scenario through the MCP gateway and print the token ledger",
    "doctor": "check this machine: bubblewrap, namespaces, seccomp, cgroups, Node, state paths",
    "paths": "show where the config, state (audit log, caches) and demo data live",
    "install": "add codemode to Claude Code, Claude Desktop or Cursor (or --print the entry)",
    "completion": "print a shell completion script (bash, zsh or fish)",
    "skills": "list, show, test, export, import, remove or approve saved skills",
    "run": "do a task with the codemode agent: a model writes code, the sandbox runs it",
    "model": "install, show or remove the embedding model for semantic search (no torch)",
    "index": "build the search index ahead of serve/search (stage and percentage on stderr)",
    "replicas": "make the key that encrypts what gateway replicas keep in the shared store",
}


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


def _chosen_command(argv: Sequence[str]) -> str | None:
    """The command named in ``argv`` (the first word that is one), or None."""
    return next((word for word in argv if word in COMMANDS), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given ``argv``, only the command it names is loaded in full (the
    others are listed with their help), so a command starts without importing the rest."""
    chosen = _chosen_command(argv) if argv is not None else None
    parser = argparse.ArgumentParser(
        prog="codemode",
        description="Agents use tools by writing code: search tool APIs, run code in a sandbox.",
        epilog="Exit statuses: `codemode exec --help` lists them.",
    )
    parser.add_argument("--version", action=_VersionAction)
    add_logging_arguments(parser, suppress=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, text in COMMANDS.items():
        sub = commands.add_parser(name, help=text, description=text)
        if argv is not None and name != chosen:
            continue  # not asked for: argparse only lists it
        module = _command_module(name)
        module.add_arguments(sub)
        add_logging_arguments(sub, suppress=True)
        sub.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from codemode.storage.private import restrict_umask

    # State, caches and approvals hold one user's data: nothing created is readable by others.
    previous = restrict_umask()
    try:
        return _main(argv)
    finally:
        os.umask(previous)  # for callers in-process (tests); a real CLI exits here anyway


def _main(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words)
    args = parser.parse_args(words)
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

"""The arguments several commands share, declared once, and what they mean.

- ``--config PATH``, ``--openapi SPEC``, ``--allow-partial``: which tools a command sees.
  With no ``--config`` and no ``./codemode.toml``, the built-in demo servers are used only when
  no ``--openapi`` is given either, and the command says so on stderr.
- ``-v``/``-q``/``--log-level``: accepted before or after the command name.

Heavy modules (config, catalog) are imported inside the functions: ``codemode --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codemode.config import CodemodeConfig
    from codemode.tools import ToolSpec

__all__ = [
    "add_catalog_arguments",
    "add_config_argument",
    "add_logging_arguments",
    "check_loaded",
    "configure_logging",
    "load_cli_config",
    "load_specs",
    "log_level",
]

LOG_LEVELS = ("debug", "info", "warning", "error")
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}  # logging's numbers
_LOG_FORMAT = "codemode: %(levelname)s %(message)s"
_HANDLER_NAME = "codemode-cli"


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        metavar="PATH",
        help="codemode.toml or mcpServers JSON (default: ./codemode.toml)",
    )


def add_catalog_arguments(parser: argparse.ArgumentParser, *, partial: bool = True) -> None:
    """``--config``, ``--openapi`` and (``partial``) ``--allow-partial``: the tools a command
    works with. A long-running gateway has no ``--allow-partial``: it serves what loaded."""
    add_config_argument(parser)
    parser.add_argument(
        "--openapi",
        type=Path,
        action="append",
        default=[],
        metavar="SPEC",
        help="add an OpenAPI spec (JSON/YAML, may be gzipped); its server is named after the file",
    )
    if not partial:
        return
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="go on when a configured server fails to load (default: exit with status 69)",
    )


def add_logging_arguments(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """``suppress`` for subcommands: a flag given before the command name is not reset."""
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS if suppress else 0,
        help="say more on stderr (-vv for debug)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="count",
        default=argparse.SUPPRESS if suppress else 0,
        help="say only errors on stderr",
    )
    parser.add_argument(
        "--log-level", choices=LOG_LEVELS, default=default, help="the log level (default: warning)"
    )


def log_level(args: argparse.Namespace) -> int:
    if args.log_level:
        return _LEVELS[args.log_level]
    if args.quiet:
        return _LEVELS["error"]
    return {0: _LEVELS["warning"], 1: _LEVELS["info"]}.get(int(args.verbose), _LEVELS["debug"])


def configure_logging(args: argparse.Namespace) -> None:
    """The root logger's level from the flags, and one handler that writes to ``sys.stderr``
    as it is at the time (handlers others installed, e.g. a test's, are kept)."""
    import logging

    class StderrHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                print(self.format(record), file=sys.stderr)
            except Exception:  # noqa: BLE001 - logging reports it (handleError), as its own handlers do
                self.handleError(record)

    root = logging.getLogger()
    root.setLevel(log_level(args))
    if not any(handler.name == _HANDLER_NAME for handler in root.handlers):
        handler = StderrHandler()
        handler.name = _HANDLER_NAME
        handler.setFormatter(logging.Formatter(_LOG_FORMAT))
        root.addHandler(handler)


def _note(message: str) -> None:
    import logging

    if logging.getLogger().isEnabledFor(logging.WARNING):
        print(f"codemode: {message}", file=sys.stderr)


def load_cli_config(path: Path | None, *, demo_allowed: bool) -> CodemodeConfig:
    """The config a command uses: ``--config``, else ``./codemode.toml``, else the built-in
    demo servers when ``demo_allowed`` (no ``--openapi``, tools wanted), else no servers."""
    from codemode.config import DEFAULT_CONFIG_NAME, CodemodeConfig, default_config, load_config

    if path is not None or (Path.cwd() / DEFAULT_CONFIG_NAME).is_file():
        return load_config(path)
    if not demo_allowed:
        return CodemodeConfig(servers={})
    config = default_config()
    _note(
        f"no --config and no ./{DEFAULT_CONFIG_NAME}: using the built-in demo servers "
        f"({', '.join(config.servers)}); pass --config PATH to use your own"
    )
    return config


def check_loaded(failures: Mapping[str, str], *, allow_partial: bool) -> None:
    """Refuse to go on when a configured server did not load, unless ``--allow-partial``."""
    from codemode.errors import ServersNotLoadedError

    if not failures:
        return
    if not allow_partial:
        raise ServersNotLoadedError(
            dict(failures),
            fix="fix the server's entry in the config, or pass --allow-partial to go on with "
            "the servers that loaded",
        )
    for name, why in sorted(failures.items()):
        _note(f"server {name!r} did not load and is left out (--allow-partial): {why}")


def load_specs(args: argparse.Namespace, config: CodemodeConfig | None = None) -> list[ToolSpec]:
    """Every tool of the catalog that ``--config`` (or ``config``, loaded from it already)
    and ``--openapi`` describe."""
    import anyio

    from codemode.catalog.loading import catalog_from_config

    if config is None:
        config = load_cli_config(args.config, demo_allowed=not args.openapi)

    async def collect() -> list[ToolSpec]:
        catalog = catalog_from_config(config, args.openapi)
        try:
            failures = await catalog.load()
            check_loaded({**config.server_problems, **failures}, allow_partial=args.allow_partial)
            return catalog.specs()
        finally:
            await catalog.aclose()

    return anyio.run(collect)

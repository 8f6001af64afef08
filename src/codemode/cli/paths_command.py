"""``codemode paths``: where the config, state and caches of this installation live."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from codemode.cli.audit_command import AUDIT_FILE_NAME
from codemode.cli.options import add_config_argument

__all__ = ["HELP", "PathEntry", "add_arguments", "installation_paths", "run"]

AUDIT_KEY_NAME = "audit.key"  # written by the engine beside the audit log

HELP = "show where the config, state (audit log, caches) and demo data live"


@dataclass(frozen=True)
class PathEntry:
    name: str
    path: str
    what: str

    @property
    def exists(self) -> bool:
        return bool(self.path) and Path(self.path).exists()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")


def config_in_use(path: Path | None) -> Path | None:
    """The file ``--config`` or ``./codemode.toml`` names; None means the built-in demo."""
    from codemode.config import DEFAULT_CONFIG_NAME

    if path is not None:
        return path.expanduser().resolve()
    local = Path.cwd() / DEFAULT_CONFIG_NAME
    return local if local.is_file() else None


def installation_paths(config_path: Path | None) -> list[PathEntry]:
    from codemode.catalog.loading import CACHE_FILE
    from codemode.config import load_config
    from codemode.demo.data import default_data_dir
    from codemode.search.semantic import default_cache_dir

    source = config_in_use(config_path)
    state = load_config(source).gateway.state_dir.expanduser()
    return [
        PathEntry(
            "config",
            str(source) if source else "",
            "the config file in use" if source else "none: the built-in demo servers are used",
        ),
        PathEntry("state", str(state), "codemode's state directory (gateway.state_dir)"),
        PathEntry("audit_log", str(state / AUDIT_FILE_NAME), "every tool call (codemode audit)"),
        PathEntry("audit_key", str(state / AUDIT_KEY_NAME), "the key of the audit log's digests"),
        PathEntry("definitions", str(state / CACHE_FILE), "cached tool definitions per server"),
        PathEntry(
            "embeddings",
            str(default_cache_dir() / "embeddings"),
            "cached search embeddings (semantic search)",
        ),
        PathEntry("demo_data", str(default_data_dir()), "the demo servers' sample data"),
    ]


def run(args: argparse.Namespace) -> int:
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

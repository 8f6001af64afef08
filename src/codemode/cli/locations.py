"""Where this installation keeps its config, state and caches (``codemode paths``, ``doctor``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["AUDIT_KEY_NAME", "PathEntry", "config_in_use", "installation_paths"]

AUDIT_KEY_NAME = "audit.key"  # written by the engine beside the audit log


@dataclass(frozen=True)
class PathEntry:
    name: str
    path: str
    what: str

    @property
    def exists(self) -> bool:
        return bool(self.path) and Path(self.path).exists()


def config_in_use(path: Path | None) -> Path | None:
    """The file ``--config`` or ``./codemode.toml`` names; None means the built-in demo."""
    from codemode.config import DEFAULT_CONFIG_NAME

    if path is not None:
        return path.expanduser().resolve()
    local = Path.cwd() / DEFAULT_CONFIG_NAME
    return local if local.is_file() else None


def installation_paths(config_path: Path | None) -> list[PathEntry]:
    from codemode.catalog.loading import CACHE_FILE
    from codemode.cli.audit_command import AUDIT_FILE_NAME
    from codemode.config import load_config
    from codemode.demo.data import default_data_dir
    from codemode.search.daemon.runtime import runtime_dir
    from codemode.search.encoder import model_dir
    from codemode.search.model.locations import install_dir
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
        PathEntry(
            "model",
            str(model_dir() or install_dir()),
            "the search embedding model (codemode model install)",
        ),
        PathEntry(
            "runtime",
            str(runtime_dir() or ""),
            "search daemons' sockets (private to this user)",
        ),
        PathEntry("demo_data", str(default_data_dir()), "the demo servers' sample data"),
    ]

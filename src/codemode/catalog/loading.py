"""Open the catalog the CLI commands use: the config's servers plus any ``--openapi`` specs."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path

from codemode.catalog.cache import DefinitionCache, MemoryDefinitionCache, SQLiteDefinitionCache
from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, ServerConfig, load_config
from codemode.connectors.base import Connector
from codemode.connectors.factory import build_connector

__all__ = ["catalog_from_config", "open_catalog", "server_name_for_spec"]

logger = logging.getLogger(__name__)

CACHE_FILE = "definitions.sqlite"


def server_name_for_spec(path: Path | str) -> str:
    """``stripe-spec3-2023-09-12.json.gz`` -> ``stripe_spec3_2023_09_12``."""
    stem = Path(path).name.split(".", 1)[0]
    name = re.sub(r"[^a-z0-9_]+", "_", stem.lower()).strip("_") or "spec"
    return f"spec_{name}" if name[0].isdigit() else name


async def open_catalog(config_path: Path | None, openapi_specs: Sequence[Path] = ()) -> Catalog:
    """Load the config (see ``load_config``), add one server per spec, list every tool."""
    config = load_config(config_path)
    catalog = catalog_from_config(config, openapi_specs)
    await catalog.load()
    return catalog


def catalog_from_config(
    config: CodemodeConfig,
    openapi_specs: Sequence[Path] = (),
    *,
    cache: DefinitionCache | None = None,
) -> Catalog:
    servers = list(config.enabled_servers())
    taken = {server.name for server in servers} | set(config.server_problems)
    for spec in openapi_specs:
        name = base = server_name_for_spec(spec)
        counter = 2
        while name in taken:
            name, counter = f"{base}_{counter}", counter + 1
        taken.add(name)
        servers.append(ServerConfig(name=name, kind="openapi", openapi=str(Path(spec).resolve())))
    connectors: list[Connector] = [build_connector(server.name, server) for server in servers]
    fingerprints = {
        server.name: _fingerprint(server) for server in servers if server.kind != "python"
    }
    eager = [server.name for server in servers if server.start == "startup"]
    if cache is None:
        cache = _default_cache(config.gateway.state_dir)
    return Catalog(
        connectors,
        cache=cache,
        fingerprints=fingerprints,
        eager=eager,
        problems=config.server_problems,
        concurrency={server.name: server.max_concurrent_calls for server in servers},
        policy=config.policy,
    )


def _fingerprint(server: ServerConfig) -> str:
    """The config hash, plus the spec file's size and mtime so an edited spec is re-read."""
    if server.kind == "openapi" and server.openapi and not server.openapi.startswith("http"):
        try:
            stat = Path(server.openapi).stat()
        except OSError:
            return server.fingerprint()
        stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
        return server.model_copy(update={"openapi": f"{server.openapi}@{stamp}"}).fingerprint()
    return server.fingerprint()


def _default_cache(state_dir: Path) -> DefinitionCache:
    try:
        return SQLiteDefinitionCache(state_dir / CACHE_FILE)
    except OSError as error:
        logger.warning("no definition cache in %s (%s); keeping it in memory", state_dir, error)
        return MemoryDefinitionCache()

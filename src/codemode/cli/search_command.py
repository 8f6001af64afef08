"""``codemode search QUERY``: find tools in the configured servers and given OpenAPI specs.

The first search over a set of inputs goes through the engine (catalog loaded, no sandboxes) and
leaves the index in the cache (``codemode.search.store``). Later searches with the same inputs
(the same config file, the same spec files unchanged) open that stored index directly and answer
without reading the catalog: a fraction of a second from process start.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.cli.options import add_catalog_arguments

if TYPE_CHECKING:
    from codemode.config import CodemodeConfig
    from codemode.search.base import Hit

__all__ = ["HELP", "add_arguments", "input_key", "remember_search_inputs", "run"]

HELP = "Search the tool catalog (configured servers and --openapi specs) for a task."

_DEFAULT_CONFIG = "codemode.toml"
_ENV_REFERENCE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", help="what you want to do, in words")
    add_catalog_arguments(parser)
    parser.add_argument("--detail", choices=("name", "summary", "full"), default="summary")
    parser.add_argument(
        "--limit",
        type=int,
        default=3,  # render.DEFAULT_HEAD (not imported: --help stays light)
        metavar="K",
        help="matches shown with signatures (more follow by name)",
    )
    parser.add_argument(
        "--part", type=int, default=1, metavar="N", help="with --detail full: part N of long text"
    )
    parser.add_argument("--json", action="store_true", help="print hits as JSON, best first")
    parser.add_argument(
        "--no-semantic", action="store_true", help="lexical search only (no embedding model)"
    )
    parser.add_argument(
        "--no-daemon",
        action="store_true",
        help="search in this process, not through the per-user search daemon "
        "(also: CODEMODE_SEARCH_DAEMON=0)",
    )


def input_key(config: Path | None, openapi: list[Path]) -> str | None:
    """A hash of everything that decides the catalog: the config file (its path, its text and
    the environment variables it refers to), each spec's path, size and mtime, and this
    installation of codemode (``code_stamp``). None when a given file cannot be read (the
    engine then reports it)."""
    from codemode.search.daemon.runtime import code_stamp

    digest = hashlib.sha256(f"codemode-search-inputs-2\0{code_stamp()}\0".encode())
    if config is None and (Path.cwd() / _DEFAULT_CONFIG).is_file():
        config = Path.cwd() / _DEFAULT_CONFIG
    try:
        if config is None:
            digest.update(b"default config\0")
        else:
            text = config.expanduser().resolve().read_bytes()
            digest.update(f"{config.expanduser().resolve()}\0".encode() + text + b"\0")
            for name in sorted(set(_ENV_REFERENCE.findall(text.decode("utf-8", "replace")))):
                digest.update(f"{name}={os.environ.get(name)}\0".encode())
        for spec in openapi:
            stat = spec.resolve().stat()
            digest.update(f"{spec.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    except OSError:
        return None
    return digest.hexdigest()[:32]


def run(args: argparse.Namespace) -> int:
    from codemode.errors import UsageError

    if args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}", fix="pass --limit 3")
    if args.part < 1:
        raise UsageError(f"--part must be at least 1, got {args.part}", fix="pass --part 2")
    key = input_key(args.config, args.openapi)
    if key is not None and args.detail != "full":
        from codemode.search.render import answer_size, check_detail

        size = answer_size(args.query, check_detail(args.detail), args.limit)
        hits = _search_stored(
            key, args.query, size, semantic=not args.no_semantic, daemon=not args.no_daemon
        )
        if hits is not None:
            _print_hits(hits, args)
            return 0
    return _search_through_engine(args, key)


def _search_stored(
    key: str, query: str, limit: int, *, semantic: bool, daemon: bool
) -> list[Hit] | None:
    """Hits from the index stored for these inputs, or None when there is none yet.

    Through the search daemon when one answers; else here, after starting the daemon in the
    background for the searches that follow (this one never waits for it; it lets the daemon
    load once its own answer is found)."""
    import logging

    from codemode.search.store import IndexStore

    fingerprint = IndexStore().lookup_inputs(key)
    if fingerprint is None:
        return None
    logging.basicConfig(format="codemode: %(message)s", level=logging.WARNING)
    wanted = semantic and _semantic_on()
    starting = None
    if daemon and (found := _daemon_key(fingerprint, wanted)) is not None:
        hits = _search_by_daemon(found, query, limit)
        if hits is not None:
            return hits
        from codemode.search.daemon.client import start_in_background

        starting = start_in_background(found, fingerprint, "semantic" if wanted else "lexical")
    try:
        from codemode.search.encoder import import_numpy_single_threaded
        from codemode.search.semantic import open_stored_index

        if wanted:
            import_numpy_single_threaded()
        # The gateway's and the daemon's encoder (8-bit query weights on ONNX Runtime when it is
        # installed), though numpy's pass would be cheaper for one query: with float32 weights
        # near ties in the 31 names swap, and the answer would not be the search tool's.
        index = open_stored_index(fingerprint, semantic=wanted)
        return index.search(query, limit) if index is not None else None
    finally:
        if starting is not None:
            starting.release()


def _semantic_on() -> bool:
    """Whether the model is here (without importing the search modules when it is)."""
    from codemode.search.encoder import semantic_available

    if semantic_available():
        return True
    from codemode.search.semantic import resolve_semantic

    return resolve_semantic(None)  # off, said once with the fix


def _daemon_key(fingerprint: str, semantic: bool) -> str | None:
    """The key of this user's daemon for the stored index, or None when daemons are off."""
    from codemode.search.daemon.runtime import daemon_enabled, daemon_key
    from codemode.search.store import default_cache_dir

    return daemon_key(fingerprint, semantic, default_cache_dir()) if daemon_enabled() else None


def _search_by_daemon(key: str, query: str, limit: int) -> list[Hit] | None:
    """Hits from the running daemon ``key``, or None when none answers (or it answers wrong)."""
    from dataclasses import replace

    from codemode.search.daemon.client import ask
    from codemode.search.store import hit_from_json

    reply = ask(key, {"op": "search", "query": query, "limit": limit})
    try:
        return [replace(hit_from_json(hit), score=float(hit["score"])) for hit in reply["hits"]]
    except (TypeError, KeyError, ValueError):
        return None  # no daemon, or a reply it should not have sent: search here


def _print_hits(hits: list[Hit], args: argparse.Namespace) -> None:
    """The answer as the MCP ``search`` tool gives it (the engine's ``search``); ``--json``:
    the hits shown with signatures."""
    from codemode.search.render import answer_head, check_detail, render_answer

    head = answer_head(args.query, hits, args.limit)
    if args.json:
        print(json.dumps([hit.to_json() for hit in hits[:head]], indent=1, ensure_ascii=False))
    else:
        print(render_answer(hits, check_detail(args.detail), head=head))


def remember_search_inputs(
    key: str, fingerprint: str, config: CodemodeConfig, openapi: list[Path]
) -> None:
    """Record that these inputs give the catalog ``fingerprint``, while the spec files named on
    the command line and in the config stay unchanged."""
    from codemode.search.store import IndexStore

    watch = [Path(spec).resolve() for spec in openapi]
    watch += [
        Path(server.openapi)
        for server in config.enabled_servers()
        if server.kind == "openapi" and server.openapi and "://" not in server.openapi
    ]
    IndexStore().remember_inputs(key, fingerprint, watch)


def _search_through_engine(args: argparse.Namespace, key: str | None) -> int:
    import logging

    import anyio

    from codemode.cli.options import check_loaded, load_cli_config
    from codemode.engine.engine import Codemode
    from codemode.search.store import catalog_fingerprint

    logging.basicConfig(format="codemode: %(message)s", level=logging.WARNING)
    config = load_cli_config(args.config, demo_allowed=not args.openapi)
    engine = Codemode(
        config,
        openapi_specs=args.openapi,
        semantic=False if args.no_semantic else None,
        audit=False,
    )

    async def search() -> tuple[str, list[dict[str, object]], dict[str, str]]:
        try:
            failures = await engine.open_for_search()
            check_loaded({**config.server_problems, **failures}, allow_partial=args.allow_partial)
            answer = await engine.search(
                args.query, detail=args.detail, limit=args.limit, part=args.part
            )
            return answer.text, answer.hits, failures
        finally:
            await engine.aclose()

    text, hits, failures = anyio.run(search)
    if key is not None and not failures:
        fingerprint = catalog_fingerprint(engine.catalog.specs())
        remember_search_inputs(key, fingerprint, config, args.openapi)
    print(json.dumps(hits, indent=1, ensure_ascii=False) if args.json else text)
    return 0

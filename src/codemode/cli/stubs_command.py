"""``codemode stubs OUTDIR``: write the generated ``servers`` package for the catalog."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["HELP", "add_arguments", "run"]

HELP = "Write the typed Python API (the `servers` package) for the configured tools to OUTDIR."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "outdir", type=Path, metavar="OUTDIR", help="directory to write servers/ in"
    )
    parser.add_argument("--config", type=Path, help="codemode.toml or mcpServers JSON")
    parser.add_argument(
        "--openapi",
        type=Path,
        action="append",
        default=[],
        metavar="SPEC",
        help="add an OpenAPI spec (JSON/YAML, may be gzipped); its server is named after the file",
    )


def run(args: argparse.Namespace) -> int:
    import time

    import anyio

    from codemode.catalog.loading import open_catalog
    from codemode.stubs import StubLibrary
    from codemode.tools import ToolSpec

    async def collect() -> list[ToolSpec]:
        catalog = await open_catalog(args.config, args.openapi)
        try:
            return catalog.specs()
        finally:
            await catalog.aclose()

    started = time.perf_counter()
    specs = anyio.run(collect)
    library = StubLibrary(specs)
    files = library.write_package(args.outdir)
    servers = library.servers
    elapsed = time.perf_counter() - started
    print(
        f"wrote {len(files)} files for {len(specs)} tools of {len(servers)} server"
        f"{'s' if len(servers) != 1 else ''} to {Path(args.outdir) / 'servers'} ({elapsed:.1f} s)"
    )
    return 0

"""``codemode stubs OUTDIR``: write the generated ``servers`` package for the catalog."""

from __future__ import annotations

import argparse
from pathlib import Path

from codemode.cli.options import add_catalog_arguments

__all__ = ["HELP", "add_arguments", "run"]

HELP = "Write the typed Python API (the `servers` package) for the configured tools to OUTDIR."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "outdir", type=Path, metavar="OUTDIR", help="directory to write servers/ in"
    )
    add_catalog_arguments(parser)


def run(args: argparse.Namespace) -> int:
    import time

    from codemode.catalog.observed import SHAPES_FILE, ShapeBook
    from codemode.cli.options import load_cli_config, load_specs
    from codemode.policy import Policy
    from codemode.policy.unannotated import policy_note
    from codemode.stubs import StubLibrary

    started = time.perf_counter()
    config = load_cli_config(args.config, demo_allowed=not args.openapi)
    specs = load_specs(args, config)
    # The result shapes the gateway observed for tools with no output schema, as it shows them.
    observed = ShapeBook(config.gateway.state_dir / SHAPES_FILE)
    deciding = Policy(config.policy)  # each stub says what the policy will do with its calls
    library = StubLibrary(
        specs, observed=observed, policy_note=lambda spec: policy_note(spec, deciding)
    )
    files = library.write_package(args.outdir)
    servers = library.servers
    elapsed = time.perf_counter() - started
    print(
        f"wrote {len(files)} files for {len(specs)} tools of {len(servers)} server"
        f"{'s' if len(servers) != 1 else ''} to {Path(args.outdir) / 'servers'} ({elapsed:.1f} s)"
    )
    return 0

"""``codemode serve``: the MCP gateway (search + execute) over stdio or streamable HTTP."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "serve the search and execute tools over MCP (stdio or streamable HTTP)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="codemode.toml or mcpServers JSON")
    parser.add_argument("--openapi", type=Path, action="append", default=[], metavar="SPEC")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--token",
        action="append",
        default=[],
        metavar="[OWNER=]TOKEN",
        help="an HTTP bearer token clients must send (repeatable; also gateway.tokens and "
        "CODEMODE_TOKENS); without any, one is generated and printed",
    )
    parser.add_argument(
        "--insecure-allow-anonymous",
        action="store_true",
        help="serve HTTP without authentication: anyone who can reach the port runs code "
        "with your tools",
    )


def run(args: argparse.Namespace) -> int:
    import logging

    import anyio

    from codemode.config import load_config
    from codemode.gateway.serve import serve

    logging.basicConfig(level=logging.WARNING, format="codemode: %(levelname)s %(message)s")
    config = load_config(args.config)
    anyio.run(
        lambda: serve(
            config,
            transport=args.transport,
            host=args.host,
            port=args.port,
            openapi_specs=args.openapi,
            tokens=args.token,
            insecure_allow_anonymous=args.insecure_allow_anonymous,
        )
    )
    return 0

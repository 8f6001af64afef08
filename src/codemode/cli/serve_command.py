"""``codemode serve``: the MCP gateway (search + execute) over stdio or streamable HTTP.

A gateway serves the servers that loaded and names the ones that did not on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.cli.options import add_catalog_arguments

if TYPE_CHECKING:
    from codemode.config import CodemodeConfig

HELP = "serve the search and execute tools over MCP (stdio or streamable HTTP)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_catalog_arguments(parser, partial=False)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--token",
        action="append",
        default=[],
        metavar="[OWNER=]TOKEN",
        help="an HTTP bearer token clients must send (repeatable; visible to other users in "
        "`ps`: prefer --token-file or CODEMODE_TOKENS); without any, one is generated and printed",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        metavar="PATH",
        help="bearer tokens, one [OWNER=]TOKEN per line (# comments); give every replica "
        "the same file",
    )
    parser.add_argument(
        "--insecure-allow-anonymous",
        action="store_true",
        help="serve HTTP without authentication: anyone who can reach the port runs code "
        "with your tools",
    )
    parser.add_argument(
        "--cluster",
        metavar="ray://HOST:PORT",
        help="run sandboxes on this Ray cluster's worker nodes (overrides [cluster] address)",
    )


def check_port_free(host: str, port: int) -> None:
    """Fail before anything starts when the port is taken: one line that says what to do."""
    import errno
    import socket

    from codemode.errors import UsageError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise UsageError(
            f"cannot serve on {host}: {error.strerror}", fix="pass --host 127.0.0.1 or a local IP"
        ) from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise UsageError(
                    f"cannot listen on {host}:{port}: {error.strerror}",
                    fix="pass another --host or --port",
                ) from None
            raise UsageError(
                f"port {port} on {host} is already in use",
                fix=f"pass --port {port + 1} (or any free port), or stop what listens there "
                f"(`ss -ltnp 'sport = :{port}'` shows it)",
            ) from None


COMMAND_LINE_WARNING = (
    "codemode: warning: --token is visible to every local user in `ps` and /proc; "
    "use --token-file PATH or CODEMODE_TOKENS instead"
)


def read_token_file(path: Path) -> list[str]:
    """The ``[OWNER=]TOKEN`` lines of a token file (blank lines and ``#`` comments skipped)."""
    from codemode.errors import UsageError

    try:
        text = path.expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(
            f"cannot read the token file {str(path)!r}: {error}",
            fix="write one [OWNER=]TOKEN per line in a file only you can read (chmod 600)",
        ) from None
    tokens = [line.strip() for line in text.splitlines()]
    tokens = [token for token in tokens if token and not token.startswith("#")]
    if not tokens:
        raise UsageError(
            f"the token file {str(path)!r} holds no token",
            fix="write one [OWNER=]TOKEN per line, e.g. alice=$(openssl rand -hex 32)",
        )
    return tokens


def cli_tokens(args: argparse.Namespace) -> list[str]:
    """``--token`` (with a warning: other users see it in ``ps``) and ``--token-file``."""
    tokens = list(args.token)
    if tokens:
        print(COMMAND_LINE_WARNING, file=sys.stderr)
    if args.token_file is not None:
        tokens += read_token_file(args.token_file)
    return tokens


def with_cluster(config: CodemodeConfig, address: str) -> CodemodeConfig:
    """``--cluster ADDRESS``: the config with sandboxes on that Ray cluster."""
    cluster = config.cluster.model_copy(update={"address": address})
    return config.model_copy(update={"cluster": cluster})


def run(args: argparse.Namespace) -> int:
    import anyio

    from codemode.cli.options import load_cli_config
    from codemode.gateway.serve import serve

    tokens = cli_tokens(args)
    if args.transport == "http":
        check_port_free(args.host, args.port)
    config = load_cli_config(args.config, demo_allowed=not args.openapi)
    if args.cluster:
        config = with_cluster(config, args.cluster)
    anyio.run(
        lambda: serve(
            config,
            transport=args.transport,
            host=args.host,
            port=args.port,
            openapi_specs=args.openapi,
            tokens=tokens,
            insecure_allow_anonymous=args.insecure_allow_anonymous,
        )
    )
    return 0

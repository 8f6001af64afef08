"""``codemode replicas keygen PATH``: a key for what gateway replicas keep in the shared store.

Writes 32 random bytes as base64 to a new file only its owner may read (mode 0600; an existing
file is never overwritten) and prints the line to put in ``[gateway]``. ``PATH`` ``-`` prints
the key instead, for ``CODEMODE_SHARED_STORE_KEY`` or a secret manager. See ``codemode.replicas``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["HELP", "add_arguments", "run"]

HELP = "make the key that encrypts what gateway replicas keep in the shared store"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    keygen = actions.add_parser(
        "keygen",
        help="write a new random key to PATH (mode 0600; '-' prints it for an env variable)",
    )
    keygen.add_argument("path", metavar="PATH", help="the key file to create, or -")


def run(args: argparse.Namespace) -> int:
    from codemode.cli.exit_codes import ExitCode
    from codemode.replicas.keys import KEY_ENV, new_key_text, write_key_file

    if args.path == "-":
        print(new_key_text())
        print(f"codemode: set it as {KEY_ENV} on every replica", file=sys.stderr)
        return 0
    path = Path(args.path).expanduser()
    try:
        key = write_key_file(path)
    except FileExistsError:
        print(
            f"codemode: error: {path} exists; a key is never overwritten (values sealed with "
            "it would be lost). Choose another path; to rotate, see the replicas docs",
            file=sys.stderr,
        )
        return ExitCode.USAGE
    except OSError as error:
        print(f"codemode: error: cannot create {path}: {error.strerror}", file=sys.stderr)
        return ExitCode.USAGE
    print(f"wrote a new key (key id {key.key_id:02x}) to {path}, readable by its owner only")
    print("give every replica the same file, and in its config:")
    print(f'[gateway]\nshared_store_key_file = "{path.resolve()}"')
    return 0

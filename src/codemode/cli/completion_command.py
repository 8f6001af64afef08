"""``codemode completion bash|zsh|fish``: print a shell completion script.

Install it with, e.g.::

    codemode completion bash > ~/.local/share/bash-completion/completions/codemode
    codemode completion zsh > "${fpath[1]}/_codemode"   # or: source <(codemode completion zsh)
    codemode completion fish > ~/.config/fish/completions/codemode.fish
"""

from __future__ import annotations

import argparse

__all__ = ["HELP", "SHELLS", "add_arguments", "run"]

HELP = "print a shell completion script (bash, zsh or fish)"
SHELLS = ("bash", "zsh", "fish")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def run(args: argparse.Namespace) -> int:
    from codemode.cli.completion import render
    from codemode.cli.main import build_parser

    print(render(args.shell, build_parser()), end="")
    return 0

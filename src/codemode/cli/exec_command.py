"""``codemode exec``: run a file (or stdin) in a fresh sandbox and print the result."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "run Python code in a fresh sandbox, with the configured tools importable from `servers`"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE|-", help="the code to run; - reads stdin")
    parser.add_argument("--config", type=Path, help="codemode.toml or mcpServers JSON")
    parser.add_argument("--openapi", type=Path, action="append", default=[], metavar="SPEC")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--timeout", type=float, metavar="S", help="wall-time limit in seconds")
    parser.add_argument(
        "--no-tools", action="store_true", help="do not connect any tool server (sandbox only)"
    )
    parser.add_argument(
        "--approve",
        choices=("ask", "all", "none"),
        default="ask",
        help="calls that need approval: ask on the terminal (default; denied without one), "
        "approve all, or deny all",
    )


def _read_code(name: str) -> str:
    from codemode.errors import UsageError

    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(
            f"cannot read {name}: {error}", fix="pass a readable UTF-8 file or -"
        ) from None


def _decide(mode: str, approval: dict[str, object]) -> bool:
    """The CLI's approver: a prompt on the terminal, or the --approve policy."""
    if mode != "ask":
        return mode == "all"
    try:
        terminal = Path("/dev/tty").open("r+", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError:
        print(
            f"codemode: {approval['tool']} needs approval and there is no terminal to ask; "
            "denied (use --approve all to allow)",
            file=sys.stderr,
        )
        return False
    with terminal:
        arguments = json.dumps(approval["arguments"], ensure_ascii=False)[:500]
        terminal.write(f"{approval['tool']}({arguments})\nreason: {approval['reason']}\n")
        terminal.write("allow this call? [y/N] ")
        terminal.flush()
        return terminal.readline().strip().lower() in ("y", "yes")


def run(args: argparse.Namespace) -> int:
    import anyio
    import anyio.to_thread

    from codemode.config import load_config
    from codemode.engine import Codemode
    from codemode.errors import UsageError

    code = _read_code(args.file)
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be positive", fix="e.g. --timeout 30")
    config = load_config(args.config)
    # One execution needs one sandbox: no warm pool.
    update: dict[str, object] = {"sandbox": config.sandbox.model_copy(update={"pool_size": 0})}
    if args.no_tools:
        update |= {"servers": {}, "server_problems": {}}
    config = config.model_copy(update=update)

    async def main() -> dict[str, object]:
        async with Codemode(config, openapi_specs=args.openapi, semantic=False) as engine:
            result = await engine.execute(code, timeout_s=args.timeout)
            while result.status == "approval_required":
                approval = result.extra["approval"]
                allow = await anyio.to_thread.run_sync(_decide, args.approve, approval)
                result = await engine.approve(approval["id"], allow)
            if args.json:
                return result.to_dict()
            return {"text": result.render_text(), "status": result.status}

    outcome = anyio.run(main)
    if args.json:
        print(json.dumps(outcome, indent=2, ensure_ascii=False))
    else:
        print(outcome["text"])
    return 0 if outcome["status"] == "ok" else 1

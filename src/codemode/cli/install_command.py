"""``codemode install CLIENT``: put this installation's entry into an MCP client's config.

The entry is merged into the client's existing ``mcpServers`` file (everything else is kept,
the old file is backed up first), or printed with ``--print``. Files, by client and scope:

    claude-desktop  user     Claude's claude_desktop_config.json (per OS)
    claude-code     user     ~/.claude.json            project  ./.mcp.json
    cursor          user     ~/.cursor/mcp.json        project  ./.cursor/mcp.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from codemode.cli.options import add_config_argument

__all__ = ["CLIENTS", "HELP", "add_arguments", "client_config_path", "run", "server_entry"]

HELP = "add codemode to Claude Code, Claude Desktop or Cursor (or --print the entry)"

CLIENTS = ("claude-code", "claude-desktop", "cursor")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("client", choices=CLIENTS, help="the MCP client to configure")
    add_config_argument(parser)
    parser.add_argument(
        "--scope",
        choices=("user", "project"),
        default="user",
        help="the client's user-wide file (default) or the current project's",
    )
    parser.add_argument("--name", default="codemode", help="the server's name in the client")
    parser.add_argument("--path", type=Path, metavar="FILE", help="write this file instead")
    parser.add_argument(
        "--print", action="store_true", help="print the entry as JSON and change nothing"
    )


def codemode_command() -> list[str]:
    """How a client starts this installation: its ``codemode`` script, else ``python -m``."""
    script = Path(sys.executable).parent / "codemode"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "codemode"]


def _temporary_environment() -> bool:
    """Is this a throwaway environment (``uvx`` runs from uv's cache)?"""
    parts = Path(sys.prefix).parts
    return len(parts) > 1 and parts[-2].startswith("archive-v")


def server_entry(client: str, config: Path | None) -> dict[str, Any]:
    command, *args = codemode_command()
    args.append("serve")
    if config is not None:
        args += ["--config", str(config)]
    entry: dict[str, Any] = {"command": command, "args": args}
    if client == "claude-code":
        entry = {"type": "stdio", **entry}
    return entry


def _claude_desktop_file() -> Path:
    home = Path.home()
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    if sys.platform == "win32":
        appdata = os.environ.get("APPDATA") or str(home / "AppData" / "Roaming")
        return Path(appdata) / "Claude" / "claude_desktop_config.json"
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    return Path(config_home) / "Claude" / "claude_desktop_config.json"


def client_config_path(client: str, scope: str) -> Path:
    from codemode.errors import UsageError

    if client == "claude-desktop":
        if scope == "project":
            raise UsageError("Claude Desktop has no project config", fix="drop --scope project")
        return _claude_desktop_file()
    if client == "claude-code":
        return Path.home() / ".claude.json" if scope == "user" else Path.cwd() / ".mcp.json"
    base = Path.home() if scope == "user" else Path.cwd()
    return base / ".cursor" / "mcp.json"


def _gateway_config(path: Path | None) -> Path | None:
    """The codemode config the client's gateway will read, as an absolute path."""
    from codemode.cli.locations import config_in_use
    from codemode.errors import UsageError

    found = config_in_use(path)
    if path is not None and (found is None or not found.is_file()):
        raise UsageError(f"no config file at {path}", fix="pass the path of an existing file")
    return found


def _read(target: Path) -> dict[str, Any]:
    from codemode.errors import UsageError

    try:
        text = target.read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(
            f"cannot read {target}: {error.strerror}", fix="check its permissions"
        ) from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(
            f"{target} is not valid JSON (line {error.lineno}): left unchanged",
            fix="repair the file, or use --print and add the entry by hand",
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        raise UsageError(
            f'{target} has no {{"mcpServers": {{...}}}} object: left unchanged',
            fix="repair the file, or use --print and add the entry by hand",
        )
    return data


def _backup(target: Path) -> Path:
    import shutil
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = target.with_name(f"{target.name}.{stamp}.bak")
    counter = 1
    while backup.exists():
        backup = target.with_name(f"{target.name}.{stamp}-{counter}.bak")
        counter += 1
    shutil.copy2(target, backup)
    return backup


def _write(target: Path, data: dict[str, Any]) -> None:
    """Replace the file in one step, keeping its permissions (``~/.claude.json`` is private)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o600
    temporary = target.with_name(f".{target.name}.codemode-{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.fchmod(fd, mode)  # exactly the old file's modes, whatever the umask (the CLI's is 077)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    temporary.replace(target)


def run(args: argparse.Namespace) -> int:
    from codemode.errors import UsageError

    config = _gateway_config(args.config)
    entry = server_entry(args.client, config)
    if config is None:
        print(
            "codemode: no --config and no ./codemode.toml: the client will get the built-in "
            "demo servers (pass --config PATH for your own)",
            file=sys.stderr,
        )
    if _temporary_environment():
        print(
            f"codemode: this codemode runs from a temporary environment ({sys.prefix}) that uv "
            "may delete; install it first (uv tool install ..., or pip install ...) and run "
            "codemode install from there",
            file=sys.stderr,
        )
    if args.print:
        print(json.dumps({"mcpServers": {args.name: entry}}, indent=2))
        return 0
    target = (args.path or client_config_path(args.client, args.scope)).expanduser().absolute()
    if config is not None and target.exists() and config.samefile(target):
        raise UsageError(
            f"{target} is both the client's config and the one codemode would read: codemode "
            "would start itself",
            fix="copy your servers into a file of their own (e.g. ~/codemode.json) and pass it "
            "with --config",
        )
    data = _read(target) if target.exists() else {}
    servers = data.setdefault("mcpServers", {})
    if servers.get(args.name) == entry:
        print(f"{target} already has this entry ({args.name!r}): nothing changed")
        return 0
    replaced = args.name in servers
    backup = _backup(target) if target.exists() else None
    servers[args.name] = entry
    _write(target, data)
    action = "replaced" if replaced else "added"
    saved = f" (the old file is at {backup})" if backup else ""
    print(f"{action} {args.name!r} in {target}{saved}")
    print(f"restart {args.client} to load it")
    return 0

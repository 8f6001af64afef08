"""``load_config``: read ``codemode.toml`` or an ``{"mcpServers": {...}}`` JSON file."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import ConfigDict, Field

from codemode.config.model import CodemodeConfig, Sections, default_config
from codemode.config.server_table import read_servers
from codemode.config_model import ConfigModel, Hint, validate_section
from codemode.errors import ConfigError

__all__ = ["DEFAULT_CONFIG_NAME", "load_config"]

DEFAULT_CONFIG_NAME = "codemode.toml"

_SERVERS_HINT = Hint(expects="a table of servers", fix="write one [servers.NAME] table per server")
_MCP_SERVERS_HINT = Hint(
    expects="an object of servers",
    fix='write {"mcpServers": {"NAME": {"command": "...", "args": [...]}}}',
)


class TomlFile(Sections):
    """``codemode.toml``: ``[servers.NAME]`` tables and codemode's own sections."""

    servers: Annotated[dict[str, object], _SERVERS_HINT] = Field(default_factory=dict)


class ClientFile(ConfigModel):
    """The JSON file MCP clients use; codemode's own sections go under ``"codemode"``."""

    # Other top-level keys belong to the client that owns the file (e.g. "globalShortcut").
    model_config = ConfigDict(extra="ignore", frozen=True)

    mcp_servers: Annotated[dict[str, object], _MCP_SERVERS_HINT] = Field(alias="mcpServers")
    codemode: Sections = Field(default_factory=Sections)


def load_config(path: str | Path | None = None) -> CodemodeConfig:
    """Read a config file (TOML or mcpServers JSON).

    With no path: ``./codemode.toml`` when present, else the embedded default (the built-in demo
    servers). A broken codemode section or an unknown top-level key raises ``ConfigError``
    naming the file, the key and the fix; a broken server is disabled alone, its reason in
    ``CodemodeConfig.server_problems``.
    """
    if path is None:
        local = Path.cwd() / DEFAULT_CONFIG_NAME
        if not local.is_file():
            return default_config()
        path = local
    path = Path(path).expanduser().resolve()
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            "config file not found",
            path=source,
            fix="check the path, or omit --config to use ./codemode.toml or the built-in demo",
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(
            f"cannot read config file: {error}", path=source, fix="check the file's permissions"
        ) from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        return _from_json(text, path)
    return _from_toml(text, path)


def _from_toml(text: str, path: Path) -> CodemodeConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(
            f"not valid TOML: {error}", path=str(path), fix="fix the syntax at the line shown"
        ) from None
    file = validate_section(TomlFile, data, source=str(path), context={"base_dir": path.parent})
    return _config(file, file.servers, "servers", path, client_format=False)


def _from_json(text: str, path: Path) -> CodemodeConfig:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"not valid JSON: {error}", path=str(path), fix="fix the syntax at the line shown"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            "a JSON config needs a top-level 'mcpServers' object",
            path=str(path),
            key="mcpServers",
            fix=_MCP_SERVERS_HINT.fix,
        )
    file = validate_section(ClientFile, data, source=str(path), context={"base_dir": path.parent})
    return _config(file.codemode, file.mcp_servers, "mcpServers", path, client_format=True)


def _config(
    sections: Sections,
    servers_table: Mapping[str, object],
    section: str,
    path: Path,
    *,
    client_format: bool,
) -> CodemodeConfig:
    servers, problems = read_servers(
        servers_table, section=section, path=path, client_format=client_format
    )
    own = {name: getattr(sections, name) for name in Sections.model_fields}
    return CodemodeConfig(
        **own,
        servers=servers,
        server_problems=problems,
        source=path,
    )

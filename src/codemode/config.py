"""Configuration: ``codemode.toml`` or the ``{"mcpServers": {...}}`` JSON of Claude and Cursor.

``load_config(path)`` returns a ``CodemodeConfig``. With no path it reads ``./codemode.toml`` when
present, else the embedded default (the two built-in demo servers). Every mistake raises
``ConfigError`` naming the file, the key and the fix. Secrets come from the environment as
``"${VAR}"`` or ``"${VAR:-default}"`` inside env, headers, url, base_url, command and args values.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from codemode.audit.settings import AuditSettings
from codemode.errors import ConfigError
from codemode.policy.settings import PolicySettings
from codemode.privacy.settings import PrivacySettings
from codemode.sandbox.settings import SandboxSettings

__all__ = [
    "CodemodeConfig",
    "GatewaySettings",
    "ServerConfig",
    "ServerKind",
    "default_config",
    "default_state_dir",
    "load_config",
]

ServerKind = Literal["stdio", "http", "openapi", "python"]
StartPolicy = Literal["startup", "first_use"]

DEFAULT_CONFIG_NAME = "codemode.toml"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_ENV_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_KIND_KEYS: dict[str, ServerKind] = {
    "command": "stdio",
    "url": "http",
    "openapi": "openapi",
    "python": "python",
}
_COMMON_KEYS = frozenset({"enabled", "start", "tools", "timeout_s"})
_KEYS_BY_KIND: dict[ServerKind, frozenset[str]] = {
    "stdio": frozenset({"command", "args", "env", "cwd"}) | _COMMON_KEYS,
    "http": frozenset({"url", "headers"}) | _COMMON_KEYS,
    "openapi": frozenset({"openapi", "base_url", "headers"}) | _COMMON_KEYS,
    "python": frozenset({"python"}) | _COMMON_KEYS,
}
# Keys other MCP clients write into their mcpServers entries; codemode has no use for them.
_FOREIGN_JSON_KEYS = frozenset(
    {"autoApprove", "alwaysAllow", "disabledTools", "description", "timeout", "transportType"}
)


def default_state_dir() -> Path:
    if explicit := os.environ.get("CODEMODE_STATE_DIR"):
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "codemode"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One upstream tool source. Exactly the fields of its ``kind`` are set."""

    name: str
    kind: ServerKind
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    openapi: str | None = None
    base_url: str | None = None
    python: str | None = None
    enabled: bool = True
    start: StartPolicy = "first_use"
    tools: tuple[str, ...] | None = None
    timeout_s: float = 60.0
    # The config file's directory: relative paths and `python` modules resolve against it.
    base_dir: str | None = None

    def fingerprint(self) -> str:
        """A stable hash of everything that can change the tools this server offers."""
        material = {
            "kind": self.kind,
            "command": self.command,
            "args": list(self.args),
            "env": dict(sorted(self.env.items())),
            "cwd": self.cwd,
            "url": self.url,
            "headers": dict(sorted(self.headers.items())),
            "openapi": self.openapi,
            "base_url": self.base_url,
            "python": self.python,
        }
        text = json.dumps(material, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    session_idle_timeout_s: float = 900.0
    max_sessions: int = 64
    state_dir: Path = field(default_factory=default_state_dir)


@dataclass(frozen=True, slots=True)
class CodemodeConfig:
    servers: Mapping[str, ServerConfig]
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    policy: PolicySettings = field(default_factory=PolicySettings)
    privacy: PrivacySettings = field(default_factory=PrivacySettings)
    audit: AuditSettings = field(default_factory=AuditSettings)
    # The file it came from; None for the embedded default.
    source: Path | None = None

    def enabled_servers(self) -> list[ServerConfig]:
        return [server for server in self.servers.values() if server.enabled]


def default_config() -> CodemodeConfig:
    """The embedded default: the built-in demo MCP servers (docs, crm, mail) over stdio."""
    servers = {
        name: ServerConfig(
            name=name,
            kind="stdio",
            command=sys.executable,
            args=("-m", f"codemode.demo.{name}_server"),
        )
        for name in ("docs", "crm", "mail")
    }
    return CodemodeConfig(servers=servers)


def load_config(path: Path | None = None) -> CodemodeConfig:
    """Read a config file (TOML or mcpServers JSON); see the module docstring for defaults."""
    if path is None:
        local = Path.cwd() / DEFAULT_CONFIG_NAME
        if not local.is_file():
            return default_config()
        path = local
    path = path.expanduser().resolve()
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
        raise ConfigError(f"cannot read config file: {error}", path=source) from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        return _load_json(text, path)
    return _load_toml(text, path)


# --- TOML ---------------------------------------------------------------------------------------


def _load_toml(text: str, path: Path) -> CodemodeConfig:
    source = str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(
            f"not valid TOML: {error}", path=source, fix="fix the syntax at the line shown"
        ) from None
    _check_keys(data, {"servers", *_SETTINGS_SECTIONS}, source, prefix="")
    servers_table = _table(data.get("servers", {}), source, "servers")
    servers: dict[str, ServerConfig] = {}
    for name, table in servers_table.items():
        servers[name] = _server_from_table(name, table, path, prefix=f"servers.{name}")
    return _with_settings(servers, data, path)


_SETTINGS_SECTIONS = ("sandbox", "gateway", "policy", "privacy", "audit")


def _with_settings(
    servers: dict[str, ServerConfig], data: Mapping[str, Any], path: Path
) -> CodemodeConfig:
    """codemode's own sections, the same in TOML and under the JSON file's "codemode" key."""
    source = str(path)
    sandbox_table = _table(data.get("sandbox", {}), source, "sandbox")
    return CodemodeConfig(
        servers=servers,
        sandbox=SandboxSettings.from_mapping(dict(sandbox_table), source=source),
        gateway=_gateway(_table(data.get("gateway", {}), source, "gateway"), path),
        policy=PolicySettings.from_mapping(
            _table(data.get("policy", {}), source, "policy"), source
        ),
        privacy=PrivacySettings.from_mapping(
            _table(data.get("privacy", {}), source, "privacy"), source
        ),
        audit=AuditSettings.from_mapping(_table(data.get("audit", {}), source, "audit"), source),
        source=path,
    )


def _gateway(table: Mapping[str, Any], path: Path) -> GatewaySettings:
    source = str(path)
    _check_keys(table, {"session_idle_timeout_s", "max_sessions", "state_dir"}, source, "gateway")
    defaults = GatewaySettings()
    idle = table.get("session_idle_timeout_s", defaults.session_idle_timeout_s)
    if isinstance(idle, bool) or not isinstance(idle, int | float) or idle <= 0:
        raise ConfigError(
            "must be a positive number of seconds",
            path=source,
            key="gateway.session_idle_timeout_s",
            fix="write e.g. session_idle_timeout_s = 900",
        )
    max_sessions = table.get("max_sessions", defaults.max_sessions)
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ConfigError(
            "must be a positive whole number",
            path=source,
            key="gateway.max_sessions",
            fix="write e.g. max_sessions = 64",
        )
    state_dir = defaults.state_dir
    if "state_dir" in table:
        raw = _string(table["state_dir"], source, "gateway.state_dir")
        state_dir = _resolve_path(raw, path.parent)
    return GatewaySettings(float(idle), max_sessions, state_dir)


# --- mcpServers JSON ----------------------------------------------------------------------------


def _load_json(text: str, path: Path) -> CodemodeConfig:
    source = str(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"not valid JSON: {error}", path=source, fix="fix the syntax at the line shown"
        ) from None
    if not isinstance(data, dict) or "mcpServers" not in data:
        raise ConfigError(
            "a JSON config needs a top-level 'mcpServers' object",
            path=source,
            key="mcpServers",
            fix='write {"mcpServers": {"NAME": {"command": "...", "args": [...]}}}',
        )
    servers_table = _table(data["mcpServers"], source, "mcpServers")
    servers: dict[str, ServerConfig] = {}
    for name, raw_entry in servers_table.items():
        prefix = f"mcpServers.{name}"
        entry = dict(_table(raw_entry, source, prefix))
        for foreign in _FOREIGN_JSON_KEYS & entry.keys():
            del entry[foreign]
        if "disabled" in entry:
            disabled = entry.pop("disabled")
            if not isinstance(disabled, bool):
                raise ConfigError("must be true or false", path=source, key=f"{prefix}.disabled")
            entry.setdefault("enabled", not disabled)
        transport = entry.pop("type", None)
        if transport is not None:
            _check_transport(transport, entry, source, prefix)
        servers[name] = _server_from_table(name, entry, path, prefix=prefix)
    settings = _table(data.get("codemode", {}), source, "codemode")
    _check_keys(settings, set(_SETTINGS_SECTIONS), source, prefix="codemode")
    return _with_settings(servers, settings, path)


def _check_transport(transport: object, entry: Mapping[str, Any], source: str, prefix: str) -> None:
    if transport in ("stdio",) and "command" in entry:
        return
    if transport in ("http", "streamable-http", "streamableHttp") and "url" in entry:
        return
    if transport == "sse":
        raise ConfigError(
            "the SSE transport is not supported",
            path=source,
            key=f"{prefix}.type",
            fix='use the server\'s streamable HTTP endpoint with "type": "http"',
        )
    raise ConfigError(
        f"unsupported or mismatched transport type {transport!r}",
        path=source,
        key=f"{prefix}.type",
        fix='use "stdio" with "command", or "http" with "url"',
    )


# --- one server ---------------------------------------------------------------------------------


def _server_from_table(name: str, table: Any, path: Path, *, prefix: str) -> ServerConfig:
    source = str(path)
    base_dir = path.parent
    table = _table(table, source, prefix)
    if not _NAME_RE.match(name):
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", name).lstrip("0123456789-") or "server"
        raise ConfigError(
            "a server name must start with a letter or '_' and hold only letters, digits, '_', '-'",
            path=source,
            key=prefix,
            fix=f"rename it, e.g. to {safe!r}",
        )
    kinds = [key for key in _KIND_KEYS if key in table]
    if not kinds:  # a misspelt kind key deserves a did-you-mean, not "none found"
        _check_keys(table, frozenset().union(*_KEYS_BY_KIND.values()), source, prefix)
    if len(kinds) != 1:
        found = " and ".join(repr(k) for k in kinds) if kinds else "none"
        raise ConfigError(
            f"a server needs exactly one of 'command', 'url', 'openapi', 'python' (found {found})",
            path=source,
            key=prefix,
            fix="keep one: command (stdio), url (streamable HTTP), openapi (spec), python (module)",
        )
    kind = _KIND_KEYS[kinds[0]]
    _check_keys(table, _KEYS_BY_KIND[kind], source, prefix)

    def key(name: str) -> str:
        return f"{prefix}.{name}"

    def text(name: str) -> str:
        return _expand(_string(table[name], source, key(name)), source, key(name))

    values: dict[str, Any] = {"name": name, "kind": kind, "base_dir": str(base_dir)}
    if kind == "stdio":
        command = text("command")
        if "/" in command and not Path(command).is_absolute():
            command = str(base_dir / command)
        values["command"] = command
        args = table.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(
                "must be a list of strings",
                path=source,
                key=key("args"),
                fix='write args = ["--flag", "value"]',
            )
        values["args"] = tuple(
            _expand(arg, source, f"{key('args')}[{i}]") for i, arg in enumerate(args)
        )
        values["env"] = _string_map(table.get("env", {}), source, key("env"))
        cwd = _string(table["cwd"], source, key("cwd")) if "cwd" in table else "."
        values["cwd"] = str(_resolve_path(cwd, base_dir))
    elif kind == "http":
        values["url"] = _url(text("url"), source, key("url"))
        values["headers"] = _string_map(table.get("headers", {}), source, key("headers"))
    elif kind == "openapi":
        spec = _string(table["openapi"], source, key("openapi"))
        is_url = spec.startswith(("http://", "https://"))
        values["openapi"] = spec if is_url else str(_resolve_path(spec, base_dir))
        if "base_url" in table:
            values["base_url"] = _url(text("base_url"), source, key("base_url"))
        values["headers"] = _string_map(table.get("headers", {}), source, key("headers"))
    else:
        target = _string(table["python"], source, key("python"))
        module, _, attribute = target.partition(":")
        if not module or not attribute:
            raise ConfigError(
                f"{target!r} is not 'module:attribute'",
                path=source,
                key=key("python"),
                fix='write python = "my_package.tools:TOOLS" (a list of functions)',
            )
        values["python"] = target
    _common(table, values, source, prefix)
    return ServerConfig(**values)


def _common(table: Mapping[str, Any], values: dict[str, Any], source: str, prefix: str) -> None:
    if "enabled" in table:
        if not isinstance(table["enabled"], bool):
            raise ConfigError(
                "must be true or false", path=source, key=f"{prefix}.enabled", fix="enabled = false"
            )
        values["enabled"] = table["enabled"]
    if "start" in table:
        if table["start"] not in ("startup", "first_use"):
            raise ConfigError(
                f"unknown start policy {table['start']!r}",
                path=source,
                key=f"{prefix}.start",
                fix='use "startup" or "first_use"',
            )
        values["start"] = table["start"]
    if "tools" in table:
        tools = table["tools"]
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise ConfigError(
                "must be a list of tool name patterns",
                path=source,
                key=f"{prefix}.tools",
                fix='write tools = ["read_*", "search"]',
            )
        values["tools"] = tuple(tools)
    if "timeout_s" in table:
        timeout = table["timeout_s"]
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(
                "must be a positive number of seconds",
                path=source,
                key=f"{prefix}.timeout_s",
                fix="write e.g. timeout_s = 60",
            )
        values["timeout_s"] = float(timeout)


# --- helpers ------------------------------------------------------------------------------------


def _check_keys(
    table: Mapping[str, Any], known: set[str] | frozenset[str], source: str, prefix: str
) -> None:
    for key in table:
        if key in known:
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"use one of: {', '.join(sorted(known))}"
        raise ConfigError(
            f"unknown key {key!r}",
            path=source,
            key=f"{prefix}.{key}" if prefix else key,
            fix=hint,
        )


def _table(value: Any, source: str, key: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(
            f"must be a table/object, not {type(value).__name__}",
            path=source,
            key=key,
            fix=f"write [{key}] with keys below it (TOML) or an object (JSON)",
        )
    return value


def _string(value: Any, source: str, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(
            f"must be a non-empty string, not {value!r}",
            path=source,
            key=key,
            fix="quote the value",
        )
    return value


def _string_map(value: Any, source: str, key: str) -> dict[str, str]:
    table = _table(value, source, key)
    result: dict[str, str] = {}
    for name, item in table.items():
        if not isinstance(item, str):
            raise ConfigError(
                f"must be a string, not {type(item).__name__}",
                path=source,
                key=f"{key}.{name}",
                fix='quote the value, e.g. "8080" or "${TOKEN}"',
            )
        result[name] = _expand(item, source, f"{key}.{name}")
    return result


def _expand(value: str, source: str, key: str) -> str:
    def replace(match: re.Match[str]) -> str:
        variable, default = match.group(1), match.group(2)
        found = os.environ.get(variable)
        if found is not None:
            return found
        if default is not None:
            return default
        raise ConfigError(
            f"environment variable {variable} is not set",
            path=source,
            key=key,
            fix=f"export {variable}=..., or write ${{{variable}:-default}} to give a default",
        )

    return _ENV_REF_RE.sub(replace, value)


def _url(value: str, source: str, key: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ConfigError(
            f"{value!r} is not an http(s) URL",
            path=source,
            key=key,
            fix="write the full URL, e.g. http://127.0.0.1:3001/mcp",
        )
    return value


def _resolve_path(value: str, base_dir: Path) -> Path:
    candidate = Path(value).expanduser()
    return candidate if candidate.is_absolute() else (base_dir / candidate).resolve()

"""The servers of a config file, each read alone: a broken one is disabled with its reason.

A server whose entry cannot be used (an unset ``${VAR}``, an unsupported transport, a key or
value that is wrong) does not stop the others: it is left out of ``servers`` and its reason,
one line naming the file, the key and the fix, goes into ``problems`` (and the log). A broken
server the file disables anyway is only logged at INFO.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import ConfigDict, StrictBool, StrictStr

from codemode.config.env import expand_references
from codemode.config.servers import ENTRY_KINDS, ServerConfig, ServerEntry
from codemode.config_model import ConfigModel, key_path, show_value, validate_section
from codemode.errors import ConfigError

__all__ = ["read_server", "read_servers"]

logger = logging.getLogger("codemode.config")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_STREAMABLE_HTTP = frozenset({"http", "streamable-http", "streamableHttp", "streamable_http"})
# Keys other MCP clients write into their mcpServers entries; codemode has no use for them.
_OTHER_CLIENTS_KEYS = frozenset(
    {"autoApprove", "alwaysAllow", "disabledTools", "description", "timeout", "transportType"}
)


class ClientKeys(ConfigModel):
    """The keys of an mcpServers entry that are not codemode's own: ``type`` and ``disabled``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: StrictStr | None = None
    disabled: StrictBool = False


def read_servers(
    table: Mapping[str, object],
    *,
    section: str,
    path: Path,
    client_format: bool,
    environ: Mapping[str, str] | None = None,
) -> tuple[dict[str, ServerConfig], dict[str, str]]:
    """``(servers, problems)`` for the ``section`` table (``servers`` or ``mcpServers``)."""
    servers: dict[str, ServerConfig] = {}
    problems: dict[str, str] = {}
    for name, raw in table.items():
        try:
            servers[name] = read_server(
                name,
                raw,
                prefix=key_path(section, [name]),
                path=path,
                client_format=client_format,
                environ=environ,
            )
        except ConfigError as error:
            reason = " ".join(str(error).split())
            if _disabled(raw, client_format):
                logger.info(
                    "server %r is disabled (and its config would not load: %s)", name, reason
                )
                continue
            problems[name] = reason
            logger.warning("server %r is disabled: %s", name, reason)
    return servers, problems


def read_server(
    name: str,
    raw: object,
    *,
    prefix: str,
    path: Path,
    client_format: bool = False,
    environ: Mapping[str, str] | None = None,
) -> ServerConfig:
    """One server entry as a ``ServerConfig``, or ``ConfigError`` saying why it cannot be used."""
    source = str(path)
    if not isinstance(raw, dict):
        raise ConfigError(
            f"must be a table/object, not {show_value(raw)}",
            path=source,
            key=prefix,
            fix=f"write [{prefix}] with keys below it (TOML) or an object (JSON)",
        )
    _check_name(name, source, prefix)
    table: dict[str, object] = dict(raw)
    if client_format:
        table = _without_client_keys(table, source, prefix)
    expanded = expand_references(table, source=source, prefix=prefix, environ=environ)
    entry = validate_section(
        _entry_model(table, source, prefix), expanded, source=source, prefix=prefix
    )
    return entry.resolve(name, path.parent)


def _check_name(name: str, source: str, prefix: str) -> None:
    if _NAME.match(name):
        return
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", name).lstrip("0123456789-") or "server"
    raise ConfigError(
        "a server name must start with a letter or '_' and hold only letters, digits, '_', '-'",
        path=source,
        key=prefix,
        fix=f"rename it, e.g. to {safe!r}",
    )


def _without_client_keys(table: dict[str, object], source: str, prefix: str) -> dict[str, object]:
    keys = validate_section(ClientKeys, table, source=source, prefix=prefix)
    if keys.type is not None:
        _check_transport(keys.type, table, source, f"{prefix}.type")
    rest = {
        key: value
        for key, value in table.items()
        if key not in _OTHER_CLIENTS_KEYS and key not in ("type", "disabled")
    }
    if keys.disabled:
        rest.setdefault("enabled", False)
    return rest


def _check_transport(transport: str, table: Mapping[str, object], source: str, key: str) -> None:
    if (transport == "stdio" and "command" in table) or (
        transport in _STREAMABLE_HTTP and "url" in table
    ):
        return
    if transport == "sse":
        raise ConfigError(
            "the SSE transport (deprecated by MCP in 2025) is not supported",
            path=source,
            key=key,
            fix='use the server\'s streamable HTTP endpoint with "type": "http" (often the same '
            "URL with /mcp in place of /sse), or run the server over stdio",
        )
    raise ConfigError(
        f"unsupported or mismatched transport type {transport!r}",
        path=source,
        key=key,
        fix='use "stdio" with "command", or "http" with "url"',
    )


def _entry_model(table: Mapping[str, object], source: str, prefix: str) -> type[ServerEntry]:
    kinds = [key for key in ENTRY_KINDS if key in table]
    if len(kinds) == 1:
        return ENTRY_KINDS[kinds[0]]
    if not kinds:
        # A misspelt kind key ("comand") picks the model it was meant for, which then names it.
        for key in table:
            close = difflib.get_close_matches(key, list(ENTRY_KINDS), n=1)
            if close:
                return ENTRY_KINDS[close[0]]
    found = " and ".join(repr(key) for key in kinds) if kinds else "none"
    verb = "keep one" if kinds else "add one"
    raise ConfigError(
        f"a server needs exactly one of 'command', 'url', 'openapi', 'python' (found {found})",
        path=source,
        key=prefix,
        fix=f"{verb}: command (stdio), url (streamable HTTP), openapi (spec), python (module)",
    )


def _disabled(raw: object, client_format: bool) -> bool:
    if not isinstance(raw, dict):
        return False
    return raw.get("enabled") is False or (client_format and raw.get("disabled") is True)

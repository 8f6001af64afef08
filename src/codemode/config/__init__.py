"""Configuration: ``codemode.toml`` or the ``{"mcpServers": {...}}`` JSON of Claude and Cursor.

``load_config(path)`` returns a ``CodemodeConfig``. With no path it reads ``./codemode.toml`` when
present, else the embedded default (the built-in demo servers). Every table is a pydantic model
(``codemode.config_model.ConfigModel``: unknown keys are errors, with a "did you mean"), and
every mistake is reported naming the file, the key path and the fix:

- in codemode's own sections (``[sandbox]``, ``[gateway]``, ``[policy]``, ``[privacy]``, or the
  same under the JSON file's ``"codemode"`` key) or at the top level, it raises ``ConfigError``;
- in one server's entry, that server alone is disabled: it is left out of ``servers`` and its
  reason is in ``CodemodeConfig.server_problems`` (and logged once).

Secrets come from the environment as ``${VAR}``, ``${env:VAR}`` (Cursor's spelling) or
``${VAR:-default}`` in any string of a server entry. Numbers and booleans in ``env``, ``args``
and ``headers`` are passed on as strings, as MCP clients do.

    config/servers.py       one model per kind of server, and the resolved ServerConfig
    config/server_table.py  reading the servers of a file, each alone
    config/env.py           ${VAR} references
    config/model.py         CodemodeConfig, GatewaySettings, the sections
    config/loading.py       load_config and the two file formats
"""

from __future__ import annotations

from codemode.config.loading import DEFAULT_CONFIG_NAME, load_config
from codemode.config.model import (
    CodemodeConfig,
    GatewaySettings,
    Sections,
    default_config,
    default_state_dir,
)
from codemode.config.servers import ServerConfig, ServerKind, StartPolicy

__all__ = [
    "DEFAULT_CONFIG_NAME",
    "CodemodeConfig",
    "GatewaySettings",
    "Sections",
    "ServerConfig",
    "ServerKind",
    "StartPolicy",
    "default_config",
    "default_state_dir",
    "load_config",
]

"""The loaded configuration (``CodemodeConfig``) and codemode's own sections.

``Sections`` are the tables that are codemode's own: ``[sandbox]``, ``[gateway]``, ``[policy]``,
``[privacy]``, ``[audit]`` and ``[state]`` in ``codemode.toml``, the same under the
``"codemode"`` key of an mcpServers JSON file. A broken section fails the whole load; a broken
server is only disabled (its reason in ``CodemodeConfig.server_problems``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator

from codemode.audit.settings import AuditSettings
from codemode.config.servers import ServerConfig
from codemode.config_model import ConfigModel, Hint, PositiveNumber, PositiveWholeNumber
from codemode.policy.settings import PolicySettings
from codemode.privacy.settings import PrivacySettings
from codemode.sandbox.settings import SandboxSettings
from codemode.skills.settings import SkillsSettings
from codemode.state.settings import StateSettings

__all__ = [
    "CodemodeConfig",
    "GatewaySettings",
    "Sections",
    "default_config",
    "default_state_dir",
]


def default_state_dir() -> Path:
    if explicit := os.environ.get("CODEMODE_STATE_DIR"):
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "codemode"


class GatewaySettings(ConfigModel):
    """``[gateway]``: sessions and where state lives."""

    session_idle_timeout_s: PositiveNumber = 900.0
    max_sessions: PositiveWholeNumber = 64
    state_dir: Annotated[Path, Hint(fix='write state_dir = "/path/to/state"')] = Field(
        default_factory=default_state_dir
    )

    @field_validator("state_dir", mode="after")
    @classmethod
    def _relative_to_the_file(cls, value: Path, info: ValidationInfo) -> Path:
        # A relative state_dir in a file means relative to that file's directory.
        value = value.expanduser()
        base_dir = (info.context or {}).get("base_dir")
        if value.is_absolute() or base_dir is None:
            return value
        return (Path(base_dir) / value).resolve()


class Sections(ConfigModel):
    """codemode's own tables; validate with ``context={"base_dir": <the file's directory>}``."""

    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    privacy: PrivacySettings = Field(default_factory=PrivacySettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    skills: SkillsSettings = Field(default_factory=SkillsSettings)


class CodemodeConfig(Sections):
    """A loaded configuration: its servers, the servers that could not load, the sections."""

    servers: Mapping[str, ServerConfig] = Field(default_factory=dict)
    # Server name -> why it is disabled (one line: file, key, what is wrong, the fix). Such a
    # server is absent from ``servers``.
    server_problems: dict[str, str] = Field(default_factory=dict)
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

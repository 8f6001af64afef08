"""The loaded configuration (``CodemodeConfig``) and codemode's own sections.

``Sections`` are the tables that are codemode's own: ``[sandbox]``, ``[gateway]``, ``[policy]``,
``[privacy]``, ``[audit]``, ``[state]`` and ``[agent]`` in ``codemode.toml``, the same under the
``"codemode"`` key of an mcpServers JSON file. A broken section fails the whole load; a broken
server is only disabled (its reason in ``CodemodeConfig.server_problems``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import Field, StrictBool, StrictFloat, StrictStr, ValidationInfo, field_validator

from codemode.config.env import expand_references
from codemode.config.servers import ServerConfig
from codemode.config_model import (
    ConfigModel,
    Hint,
    PositiveNumber,
    PositiveWholeNumber,
    WholeNumber,
    invalid,
)
from codemode.privacy.settings import PrivacySettings
from codemode.settings.agent import AgentSettings
from codemode.settings.audit import AuditSettings
from codemode.settings.cluster import ClusterSettings
from codemode.settings.policy import PolicySettings
from codemode.settings.sandbox import SandboxSettings
from codemode.settings.skills import SkillsSettings
from codemode.settings.state import StateSettings

__all__ = [
    "CodemodeConfig",
    "GatewaySettings",
    "OAuthSettings",
    "Sections",
    "default_config",
    "default_state_dir",
]


def default_state_dir() -> Path:
    if explicit := os.environ.get("CODEMODE_STATE_DIR"):
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "codemode"


class OAuthSettings(ConfigModel):
    """``[gateway.oauth]``: accept access tokens of an OAuth 2.1 authorization server, checked
    by token introspection (RFC 7662), as a resource server of the MCP authorization spec."""

    # The authorization server clients get tokens from (named in the resource metadata).
    issuer: Annotated[str, Hint(fix='write issuer = "https://login.example.com"')]
    introspection_url: Annotated[
        str, Hint(fix='write introspection_url = "https://login.example.com/introspect"')
    ]
    # This gateway's own URL, as tokens must name it in their audience.
    resource: Annotated[str, Hint(fix='write resource = "https://codemode.example.com/mcp"')]
    client_id: str = ""
    client_secret: str = ""
    scopes: list[str] = Field(default_factory=list)

    @field_validator("client_id", "client_secret", mode="after")
    @classmethod
    def _expand(cls, value: str) -> str:
        return str(expand_references(value, source="config", prefix="gateway.oauth"))


class GatewaySettings(ConfigModel):
    """``[gateway]``: sessions and where state lives."""

    session_idle_timeout_s: PositiveNumber = 900.0
    # A session idle this long is checkpointed and its sandbox released (its memory freed);
    # the next execution restores it. 0: sandboxes stay until the session closes.
    idle_release_s: Annotated[StrictFloat, Field(ge=0)] = 50.0
    # Sessions that hold a sandbox at once (running, paused or idle and not released yet);
    # at the limit the least recently used idle one is released to make room.
    max_sessions: PositiveWholeNumber = 64
    # Sessions kept at once, released ones included (their checkpoints take disk).
    max_stored_sessions: Annotated[WholeNumber, Field(gt=0, validate_default=True)] = 1024
    # Images an execution made come back in its result as small MCP image content (the
    # files are also resources); off for clients that do not take images.
    result_images: StrictBool = True
    # Tools an owner's code called after a search rank higher in that owner's later searches
    # for similar words (kept in memory, per owner; never across owners).
    learn_from_use: StrictBool = True
    state_dir: Annotated[Path, Hint(fix='write state_dir = "/path/to/state"')] = Field(
        default_factory=default_state_dir
    )
    # Sessions one client (a token's owner, or the one stdio client) may hold at once.
    max_sessions_per_client: PositiveWholeNumber = 16
    # Seconds between progress notifications to a client that asked for them.
    progress_interval_s: PositiveNumber = 5.0
    # Token owners who may open the operator console (/console on HTTP gateways). The
    # default is the owner of a generated or bare token: a single-user gateway's operator.
    operators: tuple[StrictStr, ...] = ("default",)
    # Where people reach this gateway (its approval page links), e.g. "https://codemode.example.com"
    # behind a proxy. None: http://HOST:PORT as served.
    public_url: Annotated[
        StrictStr | None, Hint(fix='write public_url = "https://codemode.example.com"')
    ] = None
    # HTTP bearer tokens: owner name -> token (``${VAR}`` expands). Each owner has its own
    # sessions, approvals and session quota.
    tokens: Annotated[
        dict[str, str], Hint(fix='write [gateway.tokens] with owner = "${TOKEN_VARIABLE}"')
    ] = Field(default_factory=dict)
    # Optional: OAuth 2.1 access tokens from an identity provider (resource-server mode).
    oauth: OAuthSettings | None = None
    # Stateless replicas: a Redis-compatible server that every replica shares (sessions,
    # leases, approvals, vaults, budgets, checkpoints, audit log). None: all in this process.
    shared_store: Annotated[
        str | None, Hint(fix='write shared_store = "redis://127.0.0.1:6379/0", or leave it out')
    ] = None
    # The key that encrypts what is sensitive in the shared store (vault entries, checkpoints,
    # results handed between replicas, the audit digest key): a file with 32 random bytes,
    # base64 or hex, that only its owner may read (``codemode replicas keygen PATH``). Or
    # CODEMODE_SHARED_STORE_KEY. None and no variable: stored unencrypted (with a warning).
    shared_store_key_file: Annotated[
        Path | None, Hint(fix='write shared_store_key_file = "/etc/codemode/store.key"')
    ] = None
    # Previous keys, kept for reading what they sealed while a rotation runs (new writes use
    # shared_store_key_file). Or CODEMODE_SHARED_STORE_OLD_KEYS (base64, comma-separated).
    shared_store_old_key_files: Annotated[
        list[Path], Hint(fix='write shared_store_old_key_files = ["/etc/codemode/old.key"]')
    ] = Field(default_factory=list)
    # How long a replica's claim on a running session lasts unless renewed (a dead replica's
    # sessions move to another one after at most this long).
    session_lease_s: PositiveNumber = 10.0

    @field_validator("tokens", mode="after")
    @classmethod
    def _expand_tokens(cls, value: dict[str, str]) -> dict[str, str]:
        expanded = expand_references(value, source="config", prefix="gateway.tokens")
        assert isinstance(expanded, dict)
        return {str(owner): str(token) for owner, token in expanded.items()}

    @field_validator("max_stored_sessions", mode="after")
    @classmethod
    def _at_least_max_sessions(cls, value: int, info: ValidationInfo) -> int:
        live = info.data.get("max_sessions")
        if isinstance(live, int) and value < live:
            raise invalid(
                f"max_stored_sessions ({value}) is below max_sessions ({live}): every session "
                "that holds a sandbox is also a stored session",
                f"raise max_stored_sessions to at least {live}, or lower max_sessions",
            )
        return value

    @field_validator("shared_store", mode="after")
    @classmethod
    def _a_redis_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("shared_store must be a redis://, rediss:// or unix:// URL")
        return value

    @field_validator("state_dir", mode="after")
    @classmethod
    def _relative_to_the_file(cls, value: Path, info: ValidationInfo) -> Path:
        return _beside_the_file(value, info)

    @field_validator("shared_store_key_file", mode="after")
    @classmethod
    def _key_file_beside(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else _beside_the_file(value, info)

    @field_validator("shared_store_old_key_files", mode="after")
    @classmethod
    def _old_key_files_beside(cls, value: list[Path], info: ValidationInfo) -> list[Path]:
        return [_beside_the_file(path, info) for path in value]


def _beside_the_file(value: Path, info: ValidationInfo) -> Path:
    """A relative path in a file means relative to that file's directory."""
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
    agent: AgentSettings = Field(default_factory=AgentSettings)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)


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

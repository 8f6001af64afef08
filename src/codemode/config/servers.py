"""One upstream tool source: the table a config file holds for it, and its ``ServerConfig``.

A ``[servers.NAME]`` table (an ``mcpServers`` entry in JSON) is one of four kinds, told apart by
its one kind key: ``command`` (MCP over stdio), ``url`` (MCP over streamable HTTP), ``openapi``
(an OpenAPI spec) or ``python`` (a module's functions). Each kind is an entry model;
``entry.resolve(name, base_dir)`` gives the ``ServerConfig`` connectors use, with relative paths
resolved against the config file's directory.
"""

from __future__ import annotations

import hashlib
import json
from abc import abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BeforeValidator, Field, StrictBool, StrictStr

from codemode.config_model import ConfigModel, Hint, PositiveNumber, PositiveWholeNumber, invalid
from codemode.tools import AnnotationsDefault

__all__ = [
    "ENTRY_KINDS",
    "HTTPEntry",
    "OpenAPIEntry",
    "PythonEntry",
    "ServerConfig",
    "ServerEntry",
    "ServerKind",
    "StartPolicy",
    "StdioEntry",
]

ServerKind = Literal["stdio", "http", "openapi", "python"]
StartPolicy = Literal["startup", "first_use"]


class ServerConfig(ConfigModel):
    """One upstream tool source, resolved. Exactly the fields of its ``kind`` are set."""

    name: str
    kind: ServerKind
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = Field(default_factory=dict)
    openapi: str | None = None
    base_url: str | None = None
    python: str | None = None
    enabled: bool = True
    start: StartPolicy = "first_use"
    tools: tuple[str, ...] | None = None
    timeout_s: float = 60.0
    # Calls to this server at once (awaitable calls from code, all sessions together).
    max_concurrent_calls: int = 16
    # MCP only: what a tool's left-out annotation hints mean, and whether JSON text is decoded.
    annotations_default: AnnotationsDefault = "mcp"
    decode_json: bool = False
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
            "annotations_default": self.annotations_default,
            "decode_json": self.decode_json,
        }
        text = json.dumps(material, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]


# --- value types --------------------------------------------------------------------------------


def _as_text(value: object) -> object:
    # MCP clients pass numbers and booleans in env, args and headers on as strings.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise invalid(
            f"{value!r} is not an http(s) URL", "write the full URL, e.g. http://127.0.0.1:3001/mcp"
        )
    return value


def _module_attribute(value: str) -> str:
    module, _, attribute = value.partition(":")
    if not module or not attribute:
        raise invalid(
            f"{value!r} is not 'module:attribute'",
            'write python = "my_package.tools:TOOLS" (a list of functions)',
        )
    return value


Text = Annotated[
    str, BeforeValidator(_as_text), Hint(fix='quote the value, e.g. "8080" or "${TOKEN}"')
]
NonEmptyText = Annotated[StrictStr, Field(min_length=1)]
HTTPURL = Annotated[StrictStr, AfterValidator(_http_url)]
TextTable = Annotated[dict[str, Text], Hint(fix='write { NAME = "value" } (TOML) or an object')]


def _resolve_path(value: str, base_dir: Path) -> Path:
    candidate = Path(value).expanduser()
    return candidate if candidate.is_absolute() else (base_dir / candidate).resolve()


# --- one model per kind -------------------------------------------------------------------------


class ServerEntry(ConfigModel):
    """The keys every kind of server takes."""

    kind: ClassVar[ServerKind]
    kind_key: ClassVar[str]

    enabled: StrictBool = True
    start: Annotated[StartPolicy, Field(title="start policy")] = "first_use"
    tools: Annotated[
        tuple[StrictStr, ...] | None,
        Hint(expects="a list of tool name patterns", fix='write tools = ["read_*", "search"]'),
    ] = None
    timeout_s: PositiveNumber = 60.0
    max_concurrent_calls: PositiveWholeNumber = 16

    def resolve(self, name: str, base_dir: Path) -> ServerConfig:
        """The ``ServerConfig`` for this entry, relative paths resolved against ``base_dir``."""
        return ServerConfig(
            name=name,
            kind=self.kind,
            enabled=self.enabled,
            start=self.start,
            tools=self.tools,
            timeout_s=self.timeout_s,
            max_concurrent_calls=self.max_concurrent_calls,
            base_dir=str(base_dir),
            **self._own_fields(base_dir),
        )

    @abstractmethod
    def _own_fields(self, base_dir: Path) -> dict[str, Any]:
        """The ``ServerConfig`` fields of this kind."""


class MCPEntry(ServerEntry):
    """The keys of both MCP kinds: how to read the tools' annotations and text results."""

    annotations_default: Annotated[
        AnnotationsDefault,
        Hint(fix='use "mcp" (unannotated tools are destructive), "read_only" or "not_destructive"'),
    ] = "mcp"
    decode_json: StrictBool = False

    def _mcp_fields(self) -> dict[str, Any]:
        return {"annotations_default": self.annotations_default, "decode_json": self.decode_json}


class StdioEntry(MCPEntry):
    """An MCP server started as a subprocess and spoken to over stdin/stdout."""

    kind = "stdio"
    kind_key = "command"

    command: NonEmptyText
    args: Annotated[tuple[Text, ...], Hint(fix='write args = ["--flag", "value"]')] = ()
    env: TextTable = Field(default_factory=dict)
    cwd: NonEmptyText = "."

    def _own_fields(self, base_dir: Path) -> dict[str, Any]:
        command = self.command
        if "/" in command and not Path(command).is_absolute():
            command = str(base_dir / command)
        return {
            "command": command,
            "args": self.args,
            "env": self.env,
            "cwd": str(_resolve_path(self.cwd, base_dir)),
            **self._mcp_fields(),
        }


class HTTPEntry(MCPEntry):
    """An MCP server spoken to over streamable HTTP."""

    kind = "http"
    kind_key = "url"

    url: HTTPURL
    headers: TextTable = Field(default_factory=dict)

    def _own_fields(self, base_dir: Path) -> dict[str, Any]:
        return {"url": self.url, "headers": self.headers, **self._mcp_fields()}


class OpenAPIEntry(ServerEntry):
    """An HTTP API described by an OpenAPI 3.x document (a path or a URL)."""

    kind = "openapi"
    kind_key = "openapi"

    openapi: NonEmptyText
    base_url: HTTPURL | None = None
    headers: TextTable = Field(default_factory=dict)

    def _own_fields(self, base_dir: Path) -> dict[str, Any]:
        spec = self.openapi
        if not spec.startswith(("http://", "https://")):
            spec = str(_resolve_path(spec, base_dir))
        return {"openapi": spec, "base_url": self.base_url, "headers": self.headers}


class PythonEntry(ServerEntry):
    """Plain Python functions: ``module:attribute`` naming a list or mapping of them."""

    kind = "python"
    kind_key = "python"

    python: Annotated[StrictStr, AfterValidator(_module_attribute)]

    def _own_fields(self, base_dir: Path) -> dict[str, Any]:
        return {"python": self.python}


ENTRY_KINDS: dict[str, type[ServerEntry]] = {
    entry.kind_key: entry for entry in (StdioEntry, HTTPEntry, OpenAPIEntry, PythonEntry)
}

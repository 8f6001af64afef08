"""From a ``ServerConfig`` to a live ``Connector``. Connector modules are imported on demand."""

from __future__ import annotations

import fnmatch
import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from codemode.config import ServerConfig
from codemode.connectors.base import BaseConnector, Connector, ToolsChangedCallback
from codemode.errors import ConfigError, ToolNotFoundError
from codemode.tools import ToolResult, ToolSpec

__all__ = ["FilteredConnector", "build_connector"]


def build_connector(name: str, server: ServerConfig) -> Connector:
    """Build the connector for one configured server (not yet started)."""
    connector = _build(name, server)
    if server.tools is not None:
        return FilteredConnector(connector, server.tools)
    return connector


def _build(name: str, server: ServerConfig) -> Connector:
    if server.kind in ("stdio", "http"):
        from codemode.connectors.mcp import HTTPTarget, MCPConnector, StdioTarget

        target: StdioTarget | HTTPTarget
        if server.kind == "stdio":
            assert server.command is not None
            target = StdioTarget(server.command, server.args, server.env, server.cwd)
        else:
            assert server.url is not None
            target = HTTPTarget(server.url, server.headers)
        return MCPConnector(
            name,
            target,
            call_timeout_s=server.timeout_s,
            annotations_default=server.annotations_default,
            decode_json=server.decode_json,
        )
    if server.kind == "openapi":
        from codemode.connectors.openapi import OpenAPIConnector

        assert server.openapi is not None
        return OpenAPIConnector(
            name,
            server.openapi,
            base_url=server.base_url,
            headers=dict(server.headers) or None,
            timeout_s=server.timeout_s,
        )
    from codemode.connectors.python import PythonConnector

    assert server.python is not None
    return PythonConnector(name, _import_functions(server))


def _import_functions(server: ServerConfig) -> Sequence[Callable[..., Any]] | Mapping[str, Any]:
    assert server.python is not None
    module_name, _, attribute = server.python.partition(":")
    source = str(server.base_dir) if server.base_dir else None
    key = f"servers.{server.name}.python"
    added = bool(server.base_dir) and server.base_dir not in sys.path
    if added:
        sys.path.insert(0, str(server.base_dir))
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(
            f"cannot import module {module_name!r}: {error}",
            path=source,
            key=key,
            fix="install the module or put it beside the config file",
        ) from error
    finally:
        if added:
            sys.path.remove(str(server.base_dir))
    try:
        value = getattr(module, attribute)
    except AttributeError:
        raise ConfigError(
            f"module {module_name!r} has no attribute {attribute!r}",
            path=source,
            key=key,
            fix="name a list (or dict) of functions defined in that module",
        ) from None
    if isinstance(value, Mapping):
        return value
    if callable(value):
        return [value]
    if isinstance(value, list | tuple):
        return list(value)
    raise ConfigError(
        f"{server.python} is a {type(value).__name__}, not a list of functions",
        path=source,
        key=key,
        fix="point it at a list (or dict) of functions",
    )


class FilteredConnector(BaseConnector):
    """Only the tools whose names match one of the glob patterns; the rest goes to ``inner``."""

    def __init__(self, inner: Connector, patterns: Sequence[str]) -> None:
        self.inner = inner
        self.name = inner.name
        self.patterns = tuple(patterns)

    def allows(self, tool: str) -> bool:
        return any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.patterns)

    async def list_tools(self) -> list[ToolSpec]:
        return [spec for spec in await self.inner.list_tools() if self.allows(spec.name)]

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        if not self.allows(tool):
            raise ToolNotFoundError(
                f"tool {self.name}.{tool} is not offered (filtered out by the config)",
                fix=f"add it to servers.{self.name}.tools in the config",
            )
        return await self.inner.call_tool(tool, arguments)

    async def start(self) -> None:
        await self.inner.start()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def on_tools_changed(self, callback: ToolsChangedCallback) -> None:
        self.inner.on_tools_changed(callback)

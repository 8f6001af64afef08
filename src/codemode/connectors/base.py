"""The connector seam: where tools come from and where their calls go."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from codemode.tools import ToolResult, ToolSpec

__all__ = ["Connector"]


@runtime_checkable
class Connector(Protocol):
    """One upstream tool source (an MCP server, an OpenAPI spec, Python functions).

    ``name`` is the server name used in ``servers.<name>`` inside the sandbox.
    ``call_tool`` returns ``ToolResult(is_error=True, ...)`` for a failure the tool reported
    and raises ``codemode.errors.ConnectorError`` when the upstream itself failed.
    """

    name: str

    async def list_tools(self) -> list[ToolSpec]: ...

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> ToolResult: ...

    async def aclose(self) -> None: ...

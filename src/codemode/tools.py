"""The shared vocabulary: what a tool is, a call to it, and what came back.

Connectors produce ``ToolSpec``s; stubs, search and the token ledger read them; the bridge moves
``ToolCall``s; connectors answer with ``ToolResult``s. Everything here is plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "AnnotationsDefault",
    "JSONObject",
    "SourceKind",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
]

JSONObject = dict[str, Any]
SourceKind = Literal["mcp", "openapi", "python"]
# What an MCP tool's left-out annotation hints mean (a server setting): the MCP spec's defaults
# (not read-only, destructive), read-only, or not destructive.
AnnotationsDefault = Literal["mcp", "read_only", "not_destructive"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool of one server, as its source describes it.

    ``name`` is the upstream name (what the upstream must be called with); the generated Python
    identifier is derived from it by ``codemode.stubs.naming``.
    """

    server: str
    name: str
    description: str = ""
    input_schema: JSONObject = field(default_factory=lambda: {"type": "object"})
    output_schema: JSONObject | None = None
    source: SourceKind = "mcp"
    # The tool's own hints; None where it declared none (for MCP: see codemode.policy).
    read_only: bool | None = None
    destructive: bool | None = None
    # MCP's openWorldHint: False for a tool that reaches only its own server's data (the
    # default flow rule lets hidden values go there); None where it declared none.
    open_world: bool | None = None
    # OpenAPI only: where the operation lives.
    method: str | None = None
    path: str | None = None
    operation_id: str | None = None
    title: str | None = None
    # OpenAPI operation tags (the product area, e.g. "DNS Records for a Zone"); search indexes them.
    tags: tuple[str, ...] = ()
    # MCP only: a text result holding a JSON object or array is decoded (the server's
    # `decode_json` setting); otherwise text stays text unless the tool has an output schema.
    decode_json: bool = False

    @property
    def qualified_name(self) -> str:
        return f"{self.server}.{self.name}"


@dataclass(frozen=True, slots=True)
class ToolCall:
    server: str
    tool: str
    arguments: JSONObject


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returned. ``value`` is JSON-like Python data (or ``bytes``/``str``)."""

    value: Any
    is_error: bool = False
    error_message: str | None = None

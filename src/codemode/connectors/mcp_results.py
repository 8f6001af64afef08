"""MCP tool definitions and results in codemode's vocabulary (``ToolSpec``, ``ToolResult``).

Two rules live here.

Result types are stable: a tool's structured content is its value when it has some; otherwise a
text part is returned as the text, a ``str``, whatever it holds. Text that holds a JSON object or
array is decoded only when the tool declares structured output (an output schema) or the
server's config sets ``decode_json = true``. So ``list_tables()`` returns a ``str`` whether its
text is ``"[]"`` or ``"[('users',)]"``.

Results the MCP SDKs wrap come back unwrapped: a tool whose function returns a list or a
scalar declares an output schema of one required property ``result`` (titled ``<tool>Output``)
and answers ``{"result": X}``. Its spec's output schema is the schema of ``X`` and its value is
``X``, so ``for row in shop.list_customers()`` iterates rows and a ``-> str`` tool returns a str.

Annotations keep what the tool declared (``None`` for a hint it left out), except that the
server's ``annotations_default`` can fill in the hints left out: ``"read_only"`` (left-out
hints mean read-only, not destructive) or ``"not_destructive"``. With the default, ``"mcp"``,
left-out hints keep the MCP spec's meaning, which the policy applies: not read-only, and
destructive.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from codemode.tools import AnnotationsDefault, ToolResult, ToolSpec

if TYPE_CHECKING:
    import mcp_types

__all__ = [
    "sdk_wrapped_schema",
    "tool_result_from_mcp",
    "tool_spec_from_mcp",
    "wrapped_tools",
]

_WRAPPER_KEY = "result"


def tool_spec_from_mcp(
    server: str,
    tool: mcp_types.Tool,
    *,
    annotations_default: AnnotationsDefault = "mcp",
    decode_json: bool = False,
) -> ToolSpec:
    annotations = tool.annotations
    read_only = annotations.read_only_hint if annotations else None
    destructive = annotations.destructive_hint if annotations else None
    if annotations_default == "read_only":
        read_only = True if read_only is None else read_only
        destructive = False if destructive is None else destructive
    elif annotations_default == "not_destructive":
        destructive = False if destructive is None else destructive
    return ToolSpec(
        server=server,
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema) or {"type": "object"},
        output_schema=_output_schema(tool.output_schema),
        source="mcp",
        read_only=read_only,
        destructive=destructive,
        open_world=annotations.open_world_hint if annotations else None,
        title=tool.title or (annotations.title if annotations else None),
        decode_json=decode_json,
    )


def sdk_wrapped_schema(schema: Any) -> dict[str, Any] | None:
    """The schema of ``X`` when ``schema`` is the SDKs' wrapper of a list or scalar result
    (an object with exactly one property, ``result``, required, titled ``...Output``)."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    properties = schema.get("properties")
    title = schema.get("title")
    if not isinstance(properties, dict) or list(properties) != [_WRAPPER_KEY]:
        return None
    if list(schema.get("required") or []) != [_WRAPPER_KEY]:
        return None
    if not isinstance(title, str) or not title.endswith("Output"):
        return None
    inner = properties[_WRAPPER_KEY]
    if not isinstance(inner, dict):
        return None
    unwrapped = {key: value for key, value in inner.items() if key != "title"}
    description = schema.get("description")
    if isinstance(description, str) and "description" not in unwrapped:
        unwrapped["description"] = description
    for key in ("$defs", "definitions"):  # references inside X point at the wrapper's
        if key in schema and key not in unwrapped:
            unwrapped[key] = schema[key]
    return unwrapped


def wrapped_tools(tools: Iterable[mcp_types.Tool]) -> set[str]:
    """The names of the tools whose results the SDKs wrap (see ``sdk_wrapped_schema``)."""
    return {tool.name for tool in tools if sdk_wrapped_schema(tool.output_schema) is not None}


def _output_schema(schema: Any) -> dict[str, Any] | None:
    if schema is None:
        return None
    unwrapped = sdk_wrapped_schema(schema)
    return unwrapped if unwrapped is not None else dict(schema)


def tool_result_from_mcp(
    result: mcp_types.CallToolResult, *, decode_json: bool = False, unwrap: bool = False
) -> ToolResult:
    """The result's value: structured content, else its parts (text decoded if ``decode_json``).

    ``unwrap``: the tool's output schema is the SDKs' wrapper (``sdk_wrapped_schema``), so
    structured content ``{"result": X}`` is ``X``."""
    import mcp_types

    structured = result.structured_content
    if (
        unwrap
        and isinstance(structured, dict)
        and len(structured) == 1
        and _WRAPPER_KEY in structured
    ):
        value: Any = structured[_WRAPPER_KEY]
    elif structured is not None:
        # The text blocks beside it are the same data serialized (the SDKs write both): not
        # decoded for nothing (a MB of records as JSON, parsed and thrown away, was 10% of a
        # call's CPU outside the privacy work).
        value = structured
    else:
        blocks = [_content_value(block, decode_json) for block in result.content]
        value = None if not blocks else blocks[0] if len(blocks) == 1 else blocks
    error_message = None
    if result.is_error:
        texts = [block.text for block in result.content if isinstance(block, mcp_types.TextContent)]
        error_message = "\n".join(texts) or "the tool reported an error"
    return ToolResult(value=value, is_error=result.is_error, error_message=error_message)


def _content_value(block: mcp_types.ContentBlock, decode_json: bool) -> Any:
    import mcp_types

    if isinstance(block, mcp_types.TextContent):
        return _json_or_text(block.text) if decode_json else block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        return {"type": block.type, "mime_type": block.mime_type, "data": block.data}
    if isinstance(block, mcp_types.ResourceLink):
        return {
            "type": "resource_link",
            "uri": str(block.uri),
            "name": block.name,
            "mime_type": block.mime_type,
        }
    resource = block.resource  # an EmbeddedResource, the last kind of content block
    item: dict[str, Any] = {"type": "resource", "uri": str(resource.uri)}
    item["mime_type"] = resource.mime_type
    if isinstance(resource, mcp_types.TextResourceContents):
        item["text"] = resource.text
    else:
        item["blob"] = resource.blob
    return item


def _json_or_text(text: str) -> Any:
    """A JSON object or array decoded; any other text as it is."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            return json.loads(stripped)
        except ValueError:
            return text
    return text

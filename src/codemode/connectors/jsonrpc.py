"""JSON-RPC messages parsed at the speed of the JSON parser, to what the MCP SDK makes of them.

The SDK's transports parse each message with ``jsonrpc_message_adapter.validate_json``. For a
message with a large string that costs up to twenty times the parse: the union of message kinds
is tried member by member (a response as a request and a notification first), and the strings
are made again for each try (2.4 ms for a 1 MB result, against 0.19 ms parsed first and then
validated: ``benchmarks/jsonrpc_codec.py``). ``parse_jsonrpc`` parses first, then validates the
parsed value: the same message. Bytes that are not JSON go to the adapter's own parse, so the
error is the one its callers expect (a ``ValidationError`` that shows the input).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pydantic_core

if TYPE_CHECKING:
    import mcp_types

__all__ = ["jsonrpc_line", "parse_jsonrpc"]


def parse_jsonrpc(data: bytes | bytearray | str) -> mcp_types.JSONRPCMessage:
    """The JSON-RPC message ``data`` holds; ``pydantic.ValidationError`` when it holds none."""
    import mcp_types

    adapter = mcp_types.jsonrpc_message_adapter
    try:
        parsed = pydantic_core.from_json(data)
    except ValueError:
        return adapter.validate_json(data, by_name=False)  # raises, saying why
    return adapter.validate_python(parsed, by_name=False)


def jsonrpc_line(message: mcp_types.JSONRPCMessage) -> bytes:
    """``message`` as a line of JSON (with its newline): the bytes the SDK's stdio transport
    writes (``model_dump_json(by_alias=True, exclude_unset=True)``), made in a third of the
    time (the model's own JSON serializer walks its free-form parameters slowly: 1.9 ms for a
    1 MB argument, against 0.5 ms dumped to Python values, which share its strings, and then
    encoded)."""
    data = message.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return pydantic_core.to_json(data) + b"\n"

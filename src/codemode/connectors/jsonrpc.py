"""JSON-RPC messages parsed at the speed of the JSON parser, to what the MCP SDK makes of them.

The SDK's transports parse each message with ``jsonrpc_message_adapter.validate_json``. For a
message with a large string that costs up to twenty times the parse: the union of message kinds
is tried member by member (a response as a request and a notification first), and the strings
are made again for each try (2.4 ms for a 1 MB result, against 0.19 ms parsed first and then
validated: ``benchmarks/jsonrpc_parse.py``). ``parse_jsonrpc`` parses first, then validates the
parsed value: the same message. Bytes that are not JSON go to the adapter's own parse, so the
error is the one its callers expect (a ``ValidationError`` that shows the input).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pydantic_core

if TYPE_CHECKING:
    import mcp_types

__all__ = ["parse_jsonrpc"]


def parse_jsonrpc(data: bytes | bytearray | str) -> mcp_types.JSONRPCMessage:
    """The JSON-RPC message ``data`` holds; ``pydantic.ValidationError`` when it holds none."""
    import mcp_types

    adapter = mcp_types.jsonrpc_message_adapter
    try:
        parsed = pydantic_core.from_json(data)
    except ValueError:
        return adapter.validate_json(data, by_name=False)  # raises, saying why
    return adapter.validate_python(parsed, by_name=False)

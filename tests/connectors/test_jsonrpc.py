"""JSON-RPC messages read and written the fast way are the messages and bytes the SDK makes."""

from __future__ import annotations

import math
from typing import Any

import mcp_types
import pytest
from pydantic_core import PydanticSerializationError

from codemode.connectors.jsonrpc import jsonrpc_line, parse_jsonrpc

TEXT = 'Order 4417 to Zoë Ünal\n\t"quoted" \\ \u2028 \x01 end ' * 5000


def built() -> list[Any]:
    """Messages as the SDK's sessions build them (constructors, values as given)."""
    return [
        mcp_types.JSONRPCRequest(
            jsonrpc="2.0",
            id=3,
            method="tools/call",
            params={"name": "echo", "arguments": {"text": TEXT, "n": 1.5, "t": (1, 2)}},
        ),
        mcp_types.JSONRPCRequest(jsonrpc="2.0", id="s-1", method="ping"),
        mcp_types.JSONRPCNotification(
            jsonrpc="2.0", method="notifications/progress", params={"progress": math.inf}
        ),
        mcp_types.JSONRPCResponse(
            jsonrpc="2.0", id=4, result={"content": [{"type": "text", "text": TEXT}], "k": {1: 2}}
        ),
        mcp_types.JSONRPCError(
            jsonrpc="2.0", id=None, error=mcp_types.ErrorData(code=-32600, message="bad")
        ),
    ]


@pytest.mark.parametrize("message", built(), ids=lambda message: type(message).__name__)
def test_a_line_is_the_bytes_the_sdk_writes(message: Any):
    expected = message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
    assert jsonrpc_line(message) == expected


@pytest.mark.parametrize("message", built(), ids=lambda message: type(message).__name__)
def test_a_line_reads_back_as_the_sdk_reads_it(message: Any):
    line = jsonrpc_line(message)
    expected = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    assert parse_jsonrpc(line) == expected
    assert parse_jsonrpc(line.decode()) == expected


def test_what_cannot_be_written_fails_as_in_the_sdk():
    message = mcp_types.JSONRPCRequest(
        jsonrpc="2.0", id=1, method="tools/call", params={"text": "\ud800"}
    )
    with pytest.raises(PydanticSerializationError):
        message.model_dump_json(by_alias=True, exclude_unset=True)
    with pytest.raises(PydanticSerializationError):
        jsonrpc_line(message)

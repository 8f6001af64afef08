"""The message parse and write offered to the MCP SDK (docs/upstream/mcp-jsonrpc-codec.md) give
the messages and bytes the SDK's own give, and fail where they fail, as they do."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import mcp_types
import pydantic_core
import pytest
from pydantic import ValidationError

PROPOSAL = Path(__file__).parents[2] / "docs" / "upstream" / "mcp-jsonrpc-codec.md"


def proposed(name: str) -> Any:
    """The function ``name`` of the document's code blocks."""
    blocks = re.findall(r"```python\n(.*?)```", PROPOSAL.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 2, "the proposal lost a code block"
    namespace: dict[str, Any] = {
        "pydantic_core": pydantic_core,
        "jsonrpc_message_adapter": mcp_types.jsonrpc_message_adapter,
        "JSONRPCMessage": mcp_types.JSONRPCMessage,
    }
    for block in blocks:
        exec(compile(block, str(PROPOSAL), "exec"), namespace)  # our own document
    return namespace[name]


def proposed_parse() -> Any:
    return proposed("parse_jsonrpc_message")


TEXT = "Zoë Ünal, Łódź\n" * 20_000 + "x" * 300_000
MESSAGES = [
    {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": TEXT}]}},
    {"jsonrpc": "2.0", "id": "r", "result": {"structuredContent": {"result": TEXT}}},
    {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": TEXT}},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"arguments": {"t": TEXT}}},
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "bad", "data": TEXT}},
]


@pytest.mark.parametrize("message", MESSAGES, ids=["result", "structured", "note", "call", "err"])
@pytest.mark.parametrize("as_text", [False, True], ids=["bytes", "str"])
def test_the_proposal_parses_every_kind_as_the_sdk_does(message: dict[str, Any], as_text: bool):
    data: bytes | str = json.dumps(message, ensure_ascii=False)
    data = data if as_text else data.encode()
    expected = mcp_types.jsonrpc_message_adapter.validate_json(data, by_name=False)
    parsed = proposed_parse()(data)
    assert type(parsed) is type(expected) and parsed == expected


@pytest.mark.parametrize("data", [b"not json", b"", b'{"jsonrpc": "2.0", "id": 1}', b"[1, 2]"])
def test_the_proposal_raises_the_validation_error_the_transports_catch(data: bytes):
    with pytest.raises(ValidationError):
        proposed_parse()(data)


@pytest.mark.parametrize("message", MESSAGES, ids=["result", "structured", "note", "call", "err"])
def test_the_proposal_writes_the_bytes_the_sdk_writes(message: dict[str, Any]):
    model = mcp_types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    expected = model.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
    assert proposed("jsonrpc_line")(model) == expected

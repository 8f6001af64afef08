"""The message parse offered to the MCP SDK (docs/upstream/mcp-jsonrpc-parse.md) gives the
message the SDK's ``validate_json`` gives, and fails where it fails, as it does."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import mcp_types
import pydantic_core
import pytest
from pydantic import ValidationError

PROPOSAL = Path(__file__).parents[2] / "docs" / "upstream" / "mcp-jsonrpc-parse.md"


def proposed_parse() -> Any:
    block = re.search(r"```python\n(.*?)```", PROPOSAL.read_text(encoding="utf-8"), re.S)
    assert block is not None, "the proposal lost its code block"
    namespace: dict[str, Any] = {
        "pydantic_core": pydantic_core,
        "jsonrpc_message_adapter": mcp_types.jsonrpc_message_adapter,
        "JSONRPCMessage": mcp_types.JSONRPCMessage,
    }
    exec(compile(block.group(1), str(PROPOSAL), "exec"), namespace)  # our own document
    return namespace["parse_jsonrpc_message"]


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

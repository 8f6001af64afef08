import json

from codemode.gateway.meta_tools import EXECUTE, SEARCH, mcp_tools, tool_definitions
from codemode.ledger import surface_tokens
from codemode.tokens import count_tokens


def test_surface_is_small_whatever_the_catalog():
    assert surface_tokens() == count_tokens(json.dumps(tool_definitions(), ensure_ascii=False))
    # The target is 500 (fresh_dir added 19, approve's remember 15, search's tail and `part` 15).
    assert surface_tokens() < 420


def test_two_tools_with_their_arguments():
    defs = {d["name"]: d for d in tool_definitions()}
    assert set(defs) == {"search", "execute", "approve"}
    assert defs["approve"]["inputSchema"]["required"] == ["approval", "allow"]
    assert set(defs["search"]["inputSchema"]["properties"]) == {"query", "detail", "limit", "part"}
    assert defs["search"]["inputSchema"]["required"] == ["query"]
    assert defs["search"]["inputSchema"]["properties"]["detail"]["enum"] == [
        "name",
        "summary",
        "full",
    ]
    assert set(defs["execute"]["inputSchema"]["properties"]) == {
        "code",
        "session",
        "fresh",
        "fresh_dir",
        "check",
    }
    assert defs["execute"]["inputSchema"]["required"] == ["code"]


def test_execute_description_teaches_the_workflow():
    text = EXECUTE["description"]
    for needle in ("from servers import", "print", "session", "ToolError", "search"):
        assert needle in text
    assert "search" in SEARCH["name"]


def test_mcp_tool_objects_round_trip():
    tools = mcp_tools()
    assert [t.name for t in tools] == ["search", "execute", "approve"]
    wire = [t.model_dump(by_alias=True, exclude_none=True) for t in tools]
    # Annotations go to the client, not into the model's context (tool_definitions).
    annotations = [entry.pop("annotations", None) for entry in wire]
    assert wire == tool_definitions()
    assert annotations[:2] == [None, None]
    assert annotations[2]["destructiveHint"] is True and annotations[2]["readOnlyHint"] is False

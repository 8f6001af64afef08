import json

import pytest

from codemode.ledger import build_ledger, mcp_tool_definition, surface_tokens
from codemode.tokens import count_tokens
from codemode.tools import ToolSpec

ADD = ToolSpec(
    server="calc",
    name="add",
    description="Add two numbers.",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
)
ECHO = ToolSpec(server="util", name="echo", description="Echo the text back.")


def test_counts_match_o200k():
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0


def test_mcp_definition_is_what_a_client_sends():
    assert mcp_tool_definition(ADD) == {
        "name": "add",
        "description": "Add two numbers.",
        "inputSchema": ADD.input_schema,
    }


def test_ledger_exact_numbers_for_a_tiny_catalog():
    rows = {row.source: row for row in build_ledger([ADD, ECHO])}
    assert list(rows) == ["calc", "util", "total"]
    add_tokens = count_tokens(json.dumps(mcp_tool_definition(ADD)))
    echo_tokens = count_tokens(json.dumps(mcp_tool_definition(ECHO)))
    # Recorded once with toktok o200k: a regression guard on the serialization.
    assert (add_tokens, echo_tokens) == (56, 25)
    assert rows["calc"].tools == 1
    assert rows["calc"].tool_definition_tokens == add_tokens
    assert rows["total"].tools == 2
    assert rows["total"].tool_definition_tokens == add_tokens + echo_tokens
    assert rows["total"].surface_tokens == surface_tokens()
    assert 0 < rows["calc"].search_answer_tokens < 100


@pytest.mark.parametrize("source", ["calc", "total"])
def test_search_answer_uses_the_default_detail(source):
    row = {r.source: r for r in build_ledger([ADD, ECHO])}[source]
    assert row.search_answer_tokens >= count_tokens("from servers import calc")

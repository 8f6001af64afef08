"""A KeyError on a field a called tool's result does not have names the field meant and the
result's fields; other KeyErrors are left as they are."""

from __future__ import annotations

from typing import Any

from codemode.checks.runtime import explain_key_error, result_fields
from codemode.sandbox.result import ExecutionResult
from codemode.tools import ToolSpec

LEADS_OUTPUT = {
    "type": "object",
    "properties": {
        "total": {"type": "integer"},
        "leads": {"type": "array", "items": {"$ref": "#/$defs/Lead"}},
    },
    "$defs": {
        "Lead": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "company": {"type": "string"},
                "deal_value": {"type": "integer"},
            },
        }
    },
}
SPEC = ToolSpec(server="crm", name="search_leads", description="", output_schema=LEADS_OUTPUT)


def _specs(server: str, tool: str) -> ToolSpec | None:
    return SPEC if (server, tool) == ("crm", "search_leads") else None


def _failed(
    message: str, calls: dict[str, Any] | None = None, kind: str = "KeyError"
) -> ExecutionResult:
    by_tool = calls if calls is not None else {"crm.search_leads": {"calls": 1, "failures": 0}}
    return ExecutionResult(
        status="error",
        exit_code=1,
        stdout="",
        stderr="",
        error={"type": kind, "message": message, "line": 5, "traceback": ""},
        files={"created": [], "modified": [], "deleted": []},
        tool_calls={"count": 1, "failures": 0, "by_tool": by_tool},
        duration_ms=1.0,
        truncated={},
        hint="",
    )


def test_fields_of_an_output_schema_are_found_through_refs_and_items():
    assert result_fields(LEADS_OUTPUT) == ["total", "leads", "id", "company", "deal_value"]
    assert result_fields(None) == []


def test_a_guessed_field_gets_the_field_meant_and_the_result_fields():
    result = _failed("'value'")
    explain_key_error(result, _specs)
    message = result.error["message"]
    assert message.startswith("'value'; did you mean 'deal_value'?")
    assert "crm.search_leads's result has: total, leads, id, company, deal_value" in message
    assert "did you mean 'deal_value'" in result.render_text()


def test_other_errors_and_far_keys_are_left_alone():
    far = _failed("'zzzz'")
    explain_key_error(far, _specs)
    assert far.error["message"] == "'zzzz'"
    present = _failed("'company'")  # a field the result has: the dict was another one
    explain_key_error(present, _specs)
    assert present.error["message"] == "'company'"
    unknown_tool = _failed("'value'", {"other.tool": {"calls": 1, "failures": 0}})
    explain_key_error(unknown_tool, _specs)
    assert unknown_tool.error["message"] == "'value'"
    not_key = _failed("'value'", kind="TypeError")
    explain_key_error(not_key, _specs)
    assert not_key.error["message"] == "'value'"

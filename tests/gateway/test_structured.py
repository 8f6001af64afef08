"""Structured content carries the facts the text shows, and no empty or internal fields."""

from __future__ import annotations

import json

from codemode.gateway.handlers import execution_result
from codemode.gateway.structured import search_structured
from codemode.ledger import build_ledger, execute_tokens
from codemode.sandbox.result import ExecutionResult
from codemode.search.base import Hit
from codemode.search.render import render_answer
from codemode.tokens import count_tokens
from codemode.tools import ToolSpec


def result(**changes) -> ExecutionResult:
    fields = {
        "status": "ok",
        "exit_code": 0,
        "stdout": "",
        "stderr": "",
        "error": None,
        "files": {"created": [], "modified": [], "deleted": []},
        "tool_calls": {"count": 0, "failures": 0, "by_tool": {}},
        "duration_ms": 12.3456,
        "truncated": {"stdout_bytes": 0, "stderr_bytes": 0, "stdout_total_bytes": 0},
        "hint": "",
        "session": "s_abc",
        "workspace_bytes": 4096,
    }
    fields.update(changes)
    return ExecutionResult(**fields)


def test_a_quiet_success_keeps_only_status_duration_and_session():
    assert result().to_structured() == {"status": "ok", "duration_ms": 12.3, "session": "s_abc"}


def test_fields_that_say_something_stay():
    data = result(
        status="error",
        exit_code=1,
        stdout="before\n",
        stderr="warn\n",
        error={"type": "ValueError", "message": "bad", "line": 3, "traceback": ""},
        files={"created": ["a.txt"], "modified": [], "deleted": ["b.txt"]},
        tool_calls={"count": 2, "failures": 1, "by_tool": {"crm.get": {"calls": 2}}},
        truncated={"stdout_bytes": 10, "stderr_bytes": 0, "stdout_total_bytes": 99},
        hint="Fix the ValueError at line 3 and run again.",
        limit="memory",
        sandbox_reset=True,
        workspace_bytes=1,
        left_running="1 thread(s)",
    ).to_structured()
    assert data == {
        "status": "error",
        "exit_code": 1,
        "stdout": "before\n",
        "stderr": "warn\n",
        "error": {"type": "ValueError", "message": "bad", "line": 3},
        "files": {"created": ["a.txt"], "deleted": ["b.txt"]},
        "tool_calls": {"count": 2, "failures": 1},
        "duration_ms": 12.3,
        "truncated": {"stdout_bytes": 10},
        "limit": "memory",
        "sandbox_reset": True,
        "session": "s_abc",
        "hint": "Fix the ValueError at line 3 and run again.",
        "left_running": "1 thread(s)",
    }


def test_every_structured_value_is_in_the_text():
    shown = result(
        status="error",
        exit_code=2,
        stdout="out\n",
        stderr="err\n",
        error={"type": "KeyError", "message": "'k'", "line": 4, "traceback": ""},
        files={"created": ["new.csv"], "modified": ["old.csv"], "deleted": ["gone.csv"]},
        tool_calls={"count": 3, "failures": 1, "by_tool": {}},
        hint="Fix the KeyError at line 4 and run again.",
    )
    text = shown.render_text()
    data = shown.to_structured()
    for key in ("stdout", "stderr", "hint", "session"):
        assert data[key].strip() in text, key
    for value in (*data["error"].values(), *data["tool_calls"].values(), data["exit_code"]):
        assert str(value) in text
    for names in data["files"].values():
        assert all(name in text for name in names)


def test_the_gateway_sends_the_lean_form():
    sent = execution_result(result(stdout="2\n"))
    assert sent.structured_content == {
        "status": "ok",
        "stdout": "2\n",
        "duration_ms": 12.3,
        "session": "s_abc",
    }
    assert sent.content[0].text == result(stdout="2\n").render_text()


def hits() -> list[Hit]:
    return [
        Hit("crm", "get_customer", "crm", "get_customer", 3.2, "Get one customer.",
            "get_customer(customer_id: str) -> dict", "GET", "/customers/{id}", "getCustomer"),
        Hit("crm", "list_customers", "crm", "list_customers", 1.1, "",
            "list_customers() -> list"),
    ]  # fmt: skip


def test_search_hits_carry_what_the_summary_text_shows():
    data = search_structured([hit.to_json() for hit in hits()], "summary")
    assert data == {
        "hits": [
            {
                "python_name": "crm.get_customer",
                "signature": "get_customer(customer_id: str) -> dict",
                "summary": "Get one customer.",
            },
            {"python_name": "crm.list_customers", "signature": "list_customers() -> list"},
        ]
    }
    text = render_answer(hits(), "summary")
    for hit in data["hits"]:
        module = hit["python_name"].split(".")[0]
        assert f"{module}.{hit['signature']}" in text
        assert hit.get("summary", "") in text


def test_the_tail_of_candidates_is_grouped_by_module_as_the_text_groups_it():
    found = [hit.to_json() for hit in hits()]
    more = ["crm.delete_customer", "docs.get_document", "crm.merge_customers"]
    data = search_structured(found, "summary", more=more)
    assert data["hits"] == search_structured(found, "summary")["hits"]
    assert data["more"] == {"crm": ["delete_customer", "merge_customers"], "docs": ["get_document"]}


def test_search_hits_at_the_name_level_are_names_only():
    data = search_structured([hit.to_json() for hit in hits()], "name")
    assert data == {
        "hits": [{"python_name": "crm.get_customer"}, {"python_name": "crm.list_customers"}]
    }


def test_the_ledger_measures_structured_content_beside_the_text():
    spec = ToolSpec(server="calc", name="add", description="Add two numbers.")
    total = {row.source: row for row in build_ledger([spec])}["total"]
    assert total.search_structured_tokens > 0
    # The lean form costs about what the text does (the old full form cost about three times).
    assert total.search_structured_tokens <= 2 * total.search_answer_tokens
    text, data = execute_tokens()
    assert 0 < data <= 2 * text


def test_execute_tokens_counts_the_two_forms_of_a_given_result():
    given = result(stdout="hello\n")
    text, data = execute_tokens(given)
    assert text == count_tokens(given.render_text())
    assert data == count_tokens(json.dumps(given.to_structured(), ensure_ascii=False))

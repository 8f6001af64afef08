"""What each kind of execute result costs the model, in o200k tokens (text, structured).

The pins were measured when the result texts were made to say everything (every call-check
problem, output before an approval); a change that makes a result cost more must say more.
"""

from __future__ import annotations

import json
from typing import Any

from codemode.checks.calls import CallProblem
from codemode.checks.result import rejected_result
from codemode.ledger import execute_tokens
from codemode.policy.approval import ApprovalRequest
from codemode.sandbox.result import ExecutionResult, make_hint
from codemode.tokens import count_tokens

SESSION = "s_" + "x" * 24


def cost(result: ExecutionResult) -> tuple[int, int]:
    return count_tokens(result.render_text()), count_tokens(json.dumps(result.to_structured()))


def within(measured: tuple[int, int], pinned: tuple[int, int]) -> bool:
    return measured[0] <= pinned[0] and measured[1] <= pinned[1]


def _result(**fields: Any) -> ExecutionResult:
    base: dict[str, Any] = {
        "status": "ok",
        "exit_code": 0,
        "stdout": "",
        "stderr": "",
        "error": None,
        "files": {"created": [], "modified": [], "deleted": []},
        "tool_calls": {"count": 1, "failures": 0, "by_tool": {}},
        "duration_ms": 41.2,
        "truncated": {},
        "hint": "",
        "session": SESSION,
    }
    result = ExecutionResult(**{**base, **fields})
    result.hint = result.hint or make_hint(result, 30.0)
    return result


def test_an_ok_result() -> None:
    assert within(execute_tokens(), (56, 80))


def test_a_runtime_error() -> None:
    error = {
        "type": "TypeError",
        "message": "string indices must be integers, not 'str'",
        "line": 3,
        "traceback": 'File "<code>", line 3, in <module>\nTypeError: string indices must be '
        "integers, not 'str'",
    }
    assert within(cost(_result(status="error", exit_code=1, error=error)), (71, 139))


def test_a_rejected_call_lists_every_problem_in_fewer_tokens_than_before() -> None:
    problems = [
        CallProblem(2, "sqlite.read_query() has no argument 'sql'; did you mean 'query'?"),
        CallProblem(2, "sqlite.read_query() is missing required argument(s): query"),
        CallProblem(3, "servers.sqlite has no tool 'list_tabels'; did you mean 'list_tables'?"),
    ]
    result = rejected_result(problems)
    result.session = SESSION
    text, data = cost(result)
    # Before: 83 + 243 tokens, and the text named only the first problem.
    assert within((text, data), (112, 136)) and text + data < 83 + 243


def test_an_approval_with_the_output_before_it() -> None:
    approval = ApprovalRequest(
        id="ap_2H9oHfX83oXr1Rmm",
        tool="crm.delete_customers",
        arguments={"ids": [1, 2, 3]},
        digest="d_0123456789abcdef",
        reason="crm.delete_customers is destructive",
    )
    bare = ExecutionResult.approval_required(approval, SESSION, 12.0)
    assert within(cost(bare), (90, 118))  # before: 117 + 144
    shown = ExecutionResult.approval_required(
        approval, SESSION, 12.0, printed="3 customers to delete\n"
    )
    assert within(cost(shown), (97, 128))

"""The result of an execution the call check stopped before it ran."""

from __future__ import annotations

from codemode.checks.calls import CallProblem
from codemode.sandbox.result import ExecutionResult

__all__ = ["rejected_result"]


def rejected_result(problems: list[CallProblem]) -> ExecutionResult:
    first = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return ExecutionResult(
        status="error",
        exit_code=None,
        stdout="",
        stderr="",
        error={
            "type": "CallCheckError",
            "message": first.message + more,
            "line": first.line,
            "traceback": "\n".join(str(problem) for problem in problems[:20]),
        },
        files={"created": [], "modified": [], "deleted": []},
        tool_calls={"count": 0, "failures": 0, "by_tool": {}},
        duration_ms=0.0,
        truncated={},
        hint=(
            "Nothing ran: the code calls a generated function wrongly. Fix the call "
            "(help(server.tool) shows its signature), or pass check=false to run it anyway."
        ),
        extra={"checked": {"problems": [str(problem) for problem in problems[:20]]}},
    )

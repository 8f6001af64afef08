"""The result of an execution the call check stopped before it ran."""

from __future__ import annotations

from codemode.checks.calls import CallProblem
from codemode.sandbox.result import ExecutionResult

__all__ = ["rejected_result"]

MAX_SHOWN = 20


def rejected_result(problems: list[CallProblem]) -> ExecutionResult:
    """Every problem is in the error's message (the text many clients show the model alone)."""
    first = problems[0]
    shown = problems[:MAX_SHOWN]
    if len(problems) == 1:
        message = first.message
    else:
        more = f"\n... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        message = f"{len(problems)} problems:\n" + "\n".join(map(str, shown)) + more
    return ExecutionResult(
        status="error",
        exit_code=None,
        stdout="",
        stderr="",
        error={"type": "CallCheckError", "message": message, "line": first.line},
        files={"created": [], "modified": [], "deleted": []},
        tool_calls={"count": 0, "failures": 0, "by_tool": {}},
        duration_ms=0.0,
        truncated={},
        hint="Nothing ran. Fix the calls (help(server.tool) shows one), or pass check=false.",
    )

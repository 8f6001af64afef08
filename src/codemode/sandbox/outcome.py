"""From what happened in one execution to the result the model sees.

The guest's ``done`` frame is untrusted input (code can forge it): only its exit code and its
error are read, validated and cut to size. Everything else (output, files, sizes, limits) the
host measured itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codemode.bridge.host import OTHER_TOOLS
from codemode.sandbox.capture import HeadTail
from codemode.sandbox.result import ExecutionResult, clip_head_tail, clip_tail, make_hint
from codemode.settings.sandbox import Limits

__all__ = ["Measured", "Outcome", "bounded_tool_calls", "build_result", "guest_error", "settle"]

_TYPE_CHARS = 100
_MESSAGE_CHARS = 2000
_TRACEBACK_CHARS = 4000
_TOOL_CHARS = 200
_TOOLS_LISTED = 50
_TOOL_NAME_CHARS = 120


@dataclass
class Outcome:
    done: dict[str, Any] | None = None
    status: str = "ok"
    limit: str | None = None
    died: bool = False
    # Set when code was left running after "done" (threads, or a forged "done").
    left_running: str | None = None
    # Cancellation: when the caller asked to stop, and bridge requests dropped after that.
    cancelled_at: float | None = None
    # The guest main thread's CPU time (ns) when the cancel was seen (see sandbox.cancel).
    cancel_cpu_ns: int | None = None
    cancel_cpu_seen: int | None = None  # and at the latest look since
    interrupted: bool = False
    refused_after_cancel: int = 0


def _text(value: Any, chars: int) -> str:
    text = value if isinstance(value, str) else str(value)
    return text[:chars]


def guest_error(done: dict[str, Any]) -> dict[str, Any] | None:
    """The error of a ``done`` frame, validated and bounded (None when there is none)."""
    error = done.get("error")
    if not isinstance(error, dict):
        return None
    line = error.get("line")
    cleaned: dict[str, Any] = {
        "type": _text(error.get("type", "Error"), _TYPE_CHARS),
        "message": _text(error.get("message", ""), _MESSAGE_CHARS),
        "line": line if isinstance(line, int) and 0 < line < 1 << 31 else None,
        "traceback": _text(error.get("traceback", ""), _TRACEBACK_CHARS),
    }
    if error.get("tool"):
        cleaned["tool"] = _text(error["tool"], _TOOL_CHARS)
    return cleaned


def _exit_code(done: dict[str, Any]) -> int | None:
    code = done.get("exit_code")
    if isinstance(code, bool) or not isinstance(code, int):
        return None
    return code if -(1 << 31) <= code < 1 << 31 else 1


def _exhaustion(error: dict[str, Any] | None) -> str | None:
    """The limit behind an error the code saw when the sandbox ran out of something."""
    if error is None:
        return None
    kind, message = error.get("type"), str(error.get("message", ""))
    if kind == "MemoryError" or (kind == "OSError" and "Cannot allocate memory" in message):
        return "memory"
    if kind == "RuntimeError" and "can't start new thread" in message:
        return "memory"
    if kind == "BlockingIOError" and "[Errno 11]" in message:
        return "processes"  # EAGAIN: a fork or spawn past the task limit
    return None


def settle(outcome: Outcome, *, processes_hit: Callable[[], bool]) -> None:
    """Turn a finished execution's error into its status: "error", or "limit" when the code
    failed because the sandbox ran out of memory or tasks."""
    if outcome.status != "ok" or outcome.done is None:
        return
    error = guest_error(outcome.done)
    exhausted = _exhaustion(error)
    if exhausted is not None:
        outcome.status = "limit"
        outcome.limit = "processes" if exhausted == "processes" or processes_hit() else exhausted
    elif error is not None or outcome.done.get("exit_code", 0) != 0:
        outcome.status = "error"


def bounded_tool_calls(stats: dict[str, Any]) -> dict[str, Any]:
    """The call counts, with at most ``_TOOLS_LISTED`` names: the code chooses the names."""
    by_tool = stats.get("by_tool", {})
    if len(by_tool) <= _TOOLS_LISTED and all(len(n) <= _TOOL_NAME_CHARS for n in by_tool):
        return stats
    listed: dict[str, Any] = {}
    other = {"calls": 0, "failures": 0}
    for name, counts in by_tool.items():
        if name != OTHER_TOOLS and len(listed) < _TOOLS_LISTED and len(name) <= _TOOL_NAME_CHARS:
            listed[name] = counts
        else:
            other["calls"] += counts["calls"]
            other["failures"] += counts["failures"]
    listed[OTHER_TOOLS] = other
    return {**stats, "by_tool": listed}


@dataclass
class Measured:
    """What the host saw of one execution, besides the outcome."""

    stdout: HeadTail
    stderr: HeadTail
    tool_calls: dict[str, Any]
    duration_ms: float
    files: dict[str, list[str]]
    files_left_out: int
    workspace_bytes: int | None
    sandbox_reset: bool


def build_result(
    outcome: Outcome, measured: Measured, limits: Limits, wall_s: float
) -> ExecutionResult:
    done = outcome.done or {}
    if outcome.cancelled_at is not None:
        outcome.status, outcome.limit = "cancelled", None
    stdout, stdout_cut = clip_tail(measured.stdout, limits.stdout_tail_chars)
    stderr, stderr_cut = clip_head_tail(
        measured.stderr, limits.stderr_head_chars, limits.stderr_tail_chars
    )
    result = ExecutionResult(
        status=outcome.status,  # type: ignore[arg-type]
        exit_code=_exit_code(done),
        stdout=stdout,
        stderr=stderr,
        error=guest_error(done),
        files=measured.files,
        tool_calls=bounded_tool_calls(measured.tool_calls),
        duration_ms=round(measured.duration_ms, 3),
        truncated={
            "stdout_bytes": stdout_cut,
            "stderr_bytes": stderr_cut,
            "stdout_total_bytes": measured.stdout.total,
            "stderr_total_bytes": measured.stderr.total,
            # Names left out of the file lists (-1: the workspace scan stopped at its caps).
            **({"files": measured.files_left_out} if measured.files_left_out else {}),
        },
        hint="",
        limit=outcome.limit,
        sandbox_reset=measured.sandbox_reset,
        captured_stdout=measured.stdout if stdout_cut else None,
        workspace_bytes=measured.workspace_bytes,
        refused_after_cancel=(
            outcome.refused_after_cancel if outcome.cancelled_at is not None else None
        ),
        left_running=outcome.left_running or None,
    )
    result.hint = make_hint(result, wall_s)
    if outcome.left_running:
        result.hint = (
            f"{outcome.left_running} still ran when the code ended, so the sandbox was "
            "restarted (variables and files are gone). Join threads before the code ends."
        )
    return result

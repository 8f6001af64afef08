"""What the model reads after each step, and the summary the user reads after an escalation.

An execution result goes back structured and short: status, the error's type, message and line
(with the short traceback of the model's own frames), the tail of stdout, stderr's head and tail
when they add something, the files created and modified, the tool calls, approvals and a
one-line hint. No session handles or timings: the loop manages the session, and a transcript
stays comparable across runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from codemode.agent.record import ApprovalRecord, Round, RunRecord

__all__ = ["escalation_summary", "render_execution", "render_search"]

_MAX_FILES = 20


def _files(files: dict[str, Any]) -> list[str]:
    lines = []
    for key in ("created", "modified", "deleted"):
        names = [str(name) for name in files.get(key) or []]
        if names:
            more = f" (+{len(names) - _MAX_FILES} more)" if len(names) > _MAX_FILES else ""
            lines.append(f"files {key}: {', '.join(names[:_MAX_FILES])}{more}")
    return lines


def render_execution(result: dict[str, Any], approvals: Sequence[ApprovalRecord] = ()) -> str:
    status = str(result.get("status"))
    head = f"status: {status}"
    if result.get("limit"):
        head += f" ({result['limit']})"
    if result.get("exit_code") not in (0, None):
        head += f", exit code {result['exit_code']}"
    lines = [head]
    error = result.get("error") or None
    if isinstance(error, dict):
        where = f" at line {error['line']}" if error.get("line") else ""
        lines.append(f"error{where}: {error.get('type')}: {error.get('message')}")
        # The traceback of the model's own frames, without its last line (said just above).
        frames = str(error.get("traceback") or "").strip().splitlines()
        if frames and frames[-1].startswith(f"{error.get('type')}:"):
            frames.pop()
        if len(frames) > 1:
            lines += frames
    stdout = str(result.get("stdout") or "")
    if stdout.strip():
        lines += ["stdout:", stdout.rstrip("\n")]
    elif status == "ok":
        lines.append("stdout: (nothing printed)")
    stderr = str(result.get("stderr") or "").strip()
    traceback_text = str(error.get("traceback") or "").strip() if isinstance(error, dict) else ""
    if stderr and stderr != traceback_text:
        lines += ["stderr:", stderr]
    lines += _files(result.get("files") or {})
    calls = result.get("tool_calls") or {}
    if isinstance(calls, dict) and calls.get("count"):
        failed = calls.get("failures") or 0
        lines.append(f"tool calls: {calls['count']}" + (f" ({failed} failed)" if failed else ""))
    lines += _approval_lines(approvals)
    if result.get("sandbox_reset"):
        lines.append("note: the sandbox was restarted; variables are gone")
    if result.get("hint"):
        lines.append(f"hint: {result['hint']}")
    return "\n".join(lines)


def _approval_lines(approvals: Sequence[ApprovalRecord]) -> list[str]:
    """One line per verdict, each tool once with how many of its calls it covers."""
    by_verdict: dict[str, dict[str, int]] = {}
    for decision in approvals:
        verdict = "allowed" if decision.allowed else "denied"
        tools = by_verdict.setdefault(verdict, {})
        tools[decision.tool] = tools.get(decision.tool, 0) + 1
    return [
        f"approval: the user {verdict} "
        + ", ".join(f"{tool} (x{n})" if n > 1 else tool for tool, n in tools.items())
        for verdict, tools in by_verdict.items()
    ]


def render_search(text: str, hits: int) -> str:
    if hits == 0:
        return "no matching functions; try other words (what the tool does, not how)"
    return text.rstrip()


def _describe(round_: Round) -> str:
    parts = []
    for step in round_.steps:
        if step.kind == "execute":
            result = step.result or {}
            error = result.get("error") or {}
            outcome = str(result.get("status"))
            if isinstance(error, dict) and error.get("type"):
                outcome += f", {error['type']}"
            parts.append(f"ran code ({outcome})")
        elif step.kind == "search":
            parts.append(f"searched {step.query!r}")
        elif step.kind == "tool":
            parts.append(f"called {step.tool}" + (" (failed)" if step.problem else ""))
        elif step.kind == "malformed":
            parts.append("gave an unusable answer")
    return f"round {round_.index}: " + ("; ".join(parts) or "nothing")


def _last_failure(record: RunRecord) -> str | None:
    for round_ in reversed(record.rounds):
        for step in reversed(round_.steps):
            if step.kind == "execute" and step.result and step.result.get("status") != "ok":
                error = step.result.get("error") or {}
                if isinstance(error, dict) and error.get("type"):
                    where = f" at line {error['line']}" if error.get("line") else ""
                    return (
                        f"round {round_.index}: {error['type']}{where}: "
                        f"{str(error.get('message'))[:300]}"
                    )
                return (
                    f"round {round_.index}: {step.result.get('status')} ({step.result.get('hint')})"
                )
            if step.problem:
                return f"round {round_.index}: {step.problem[:300]}"
    return None


def escalation_summary(record: RunRecord) -> str:
    """A short note for the user when the round cap is reached: tried, failed last, needed."""
    lines = [f"Stopped after {len(record.rounds)} rounds (the cap) without finishing the task."]
    shown = record.rounds[-5:]
    if len(record.rounds) > len(shown):
        lines.append(f"Tried ({len(record.rounds) - len(shown)} earlier rounds not shown):")
    else:
        lines.append("Tried:")
    lines += [f"  {_describe(r)}" for r in shown]
    failure = _last_failure(record)
    lines.append(f"Failed last: {failure}" if failure else "Nothing failed; the task was not done.")
    last_thoughts = next((r.thoughts for r in reversed(record.rounds) if r.thoughts), "")
    if last_thoughts:
        lines.append(f"The model's last plan: {last_thoughts[:300]}")
    lines.append(
        "Needs: your decision: clarify the task or fix what failed above, then run again "
        "(or allow more rounds with --max-rounds)."
    )
    return "\n".join(lines)

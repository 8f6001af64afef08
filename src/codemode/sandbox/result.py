"""The execution result: what ``execute`` returns to the model. Small and predictable."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from codemode.policy.approval import ApprovalRequest
from codemode.sandbox.capture import HeadTail
from codemode.sandbox.reports import CancelReport, Restore, SessionLoss

__all__ = ["ExecutionResult", "Status", "clip_head_tail", "clip_tail", "whole_text"]

# "session_lost": the node holding the session's sandbox was lost (cluster backend).
Status = Literal[
    "ok", "error", "timeout", "limit", "approval_required", "cancelled", "session_lost"
]


@dataclass
class ExecutionResult:
    status: Status
    exit_code: int | None
    stdout: str
    stderr: str
    error: dict[str, Any] | None
    files: dict[str, list[str]]
    tool_calls: dict[str, Any]
    duration_ms: float
    truncated: dict[str, int]
    hint: str
    limit: str | None = None
    session: str | None = None
    # True when the sandbox was replaced after this execution: variables and files are gone.
    sandbox_reset: bool = False
    # Reports beside the output, each set once by the layer that knows it; ``None``: nothing
    # to report. In ``to_dict`` and ``to_structured`` each is a top-level key of its own name.
    # approval_required: the call that waits for a human.
    approval: ApprovalRequest | None = None
    # Bytes the workspace holds after the execution (for scripts, not the model).
    workspace_bytes: int | None = None
    # Tool calls refused after the client cancelled (set on every cancelled execution).
    refused_after_cancel: int | None = None
    # What still ran when the code ended (the sandbox was restarted).
    left_running: str | None = None
    # Files a fresh interpreter did not get from the old one (first ones only).
    files_not_carried: list[str] | None = None
    # Why the checkpoint after this execution was not saved.
    checkpoint: str | None = None
    # The session continued from its checkpoint before this execution.
    restored: Restore | None = None
    # The workspace file holding all of stdout when only its tail is shown.
    stdout_file: str | None = None
    # Project mode: the task's folder and the workspace's tree.
    task_dir: str | None = None
    workspace_tree: str | None = None
    # The approvals this session remembers (``Grant.to_dict`` each).
    grants: list[dict[str, Any]] | None = None
    # The execution before this one was cancelled: what it did.
    cancelled_before: CancelReport | None = None
    # ``codemode exec --files``: each changed file -> where it was saved, or why not.
    saved_files: dict[str, str] | None = None
    # session_lost: the node that was lost (``node`` and ``ran`` in the JSON).
    loss: SessionLoss | None = None
    # All of stdout the host kept (head and tail of up to ``output_kept_bytes``), so a session
    # can write it to a file when the model saw only its tail. Never sent anywhere itself.
    captured_stdout: HeadTail | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        data = {
            item.name: copy.deepcopy(getattr(self, item.name))
            for item in fields(self)
            if item.name not in _NOT_PLAIN
        }
        data.update(self.reports())
        if data["limit"] is None:
            del data["limit"]
        return data

    def reports(self) -> dict[str, Any]:
        """The reports that are set, in their JSON form (top-level keys of ``to_dict``)."""
        data: dict[str, Any] = {}
        for name in _REPORT_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if name == "loss":
                data.update(node=value.node, ran=value.ran)
            elif isinstance(value, ApprovalRequest | Restore | CancelReport):
                data[name] = copy.deepcopy(value.to_dict())
            else:
                data[name] = copy.deepcopy(value)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExecutionResult:
        """The result ``to_dict`` gave (keys it does not know are ignored)."""
        known = {item.name for item in fields(cls)} - _NOT_PLAIN
        result = cls(**{name: value for name, value in data.items() if name in known})
        approval, restored, cancelled = (
            data.get(name) for name in ("approval", "restored", "cancelled_before")
        )
        return replace(
            result,
            **{name: data[name] for name in _PLAIN_REPORTS if name in data},
            approval=ApprovalRequest.from_dict(approval) if approval else None,
            restored=Restore.from_dict(restored) if restored else None,
            cancelled_before=CancelReport.from_dict(cancelled) if cancelled else None,
            loss=SessionLoss(data.get("node"), bool(data["ran"])) if "ran" in data else None,
        )

    def to_structured(self) -> dict[str, Any]:
        """The lean form an MCP client gets as structured content: the facts ``render_text``
        shows, without empty or default fields (``to_dict`` keeps every field, for scripts).

        ``status`` and ``duration_ms`` are always there, ``session`` when set; everything
        else only when it says something: a non-zero ``exit_code``, non-empty output,
        ``error``, changed ``files``, ``tool_calls`` when there were any, ``truncated`` when
        something was cut, ``limit``, ``sandbox_reset`` and ``hint``."""
        data: dict[str, Any] = {"status": self.status}
        if self.exit_code not in (0, None):
            data["exit_code"] = self.exit_code
        if self.stdout:
            data["stdout"] = self.stdout
        if self.stderr:
            data["stderr"] = self.stderr
        if self.error:
            data["error"] = {k: v for k, v in self.error.items() if v not in (None, "")}
        files = {kind: names for kind, names in self.files.items() if names}
        if files:
            data["files"] = files
        if self.tool_calls.get("count"):
            data["tool_calls"] = {
                "count": self.tool_calls["count"],
                "failures": self.tool_calls.get("failures", 0),
            }
        data["duration_ms"] = round(self.duration_ms, 1)
        cut = {k: self.truncated[k] for k in _CUT_KEYS if self.truncated.get(k)}
        if cut:
            data["truncated"] = cut
        if self.limit:
            data["limit"] = self.limit
        if self.sandbox_reset:
            data["sandbox_reset"] = True
        if self.session:
            data["session"] = self.session
        if self.hint:
            data["hint"] = self.hint
        data.update(
            (key, value)
            for key, value in self.reports().items()
            if value and key not in _UNSTRUCTURED_REPORTS
        )
        return data

    @classmethod
    def approval_required(
        cls,
        approval: ApprovalRequest,
        session: str | None,
        duration_ms: float,
        *,
        printed: str = "",
    ) -> ExecutionResult:
        """The execution is paused at a tool call that a human must approve first;
        ``printed``: what the code printed before it (the user may need it to decide)."""
        return cls(
            status="approval_required",
            exit_code=None,
            stdout=printed,
            stderr="",
            error=None,
            files={"created": [], "modified": [], "deleted": []},
            tool_calls={},
            duration_ms=duration_ms,
            truncated={},
            hint="Ask the user, then call approve with this approval and allow=true or false.",
            session=session,
            approval=approval,
        )

    def render_text(self) -> str:
        """A compact rendering for the model (the JSON object carries the same facts)."""
        head = f"status: {self.status}"
        approval = self.approval
        if approval is not None:
            origins = approval.values.origins if approval.values is not None else {}
            lines = [
                head,
                *(["stdout:", self.stdout.rstrip("\n")] if self.stdout else []),
                # In full: an approver must see everything that would run.
                f"approval needed: {approval.tool}({json.dumps(approval.arguments)})",
                f"digest: {approval.digest}",
                *([f"full arguments: {approval.file}"] if approval.file else []),
                *(
                    f"sends values from {origin}: {', '.join(tokens)}"
                    for origin, tokens in origins.items()
                ),
                f"reason: {approval.reason}",
                f"approval: {approval.id}",
                f"session: {self.session}",
                f"hint: {self.hint}",
            ]
            return "\n".join(lines)
        if self.limit:
            head += f" ({self.limit})"
        if self.exit_code not in (0, None):
            head += f", exit code {self.exit_code}"
        head += f", {self.duration_ms:.0f} ms"
        calls = self.tool_calls.get("count", 0)
        if calls:
            head += f", {calls} tool calls ({self.tool_calls.get('failures', 0)} failed)"
        lines = [head]
        if self.stdout:
            lines += ["stdout:", self.stdout.rstrip("\n")]
        if self.error:
            where = f" at line {self.error['line']}" if self.error.get("line") else ""
            lines.append(f"error{where}: {self.error['type']}: {self.error['message']}")
        if self.stderr and (self.status != "ok" or not self.error):
            lines += ["stderr:", self.stderr.rstrip("\n")]
        changed = [*self.files.get("created", []), *self.files.get("modified", [])]
        if changed:
            lines.append(
                "files: " + ", ".join(changed[:20]) + (" ..." if len(changed) > 20 else "")
            )
        deleted = self.files.get("deleted", [])
        if deleted:
            lines.append(
                "deleted: " + ", ".join(deleted[:20]) + (" ..." if len(deleted) > 20 else "")
            )
        if self.task_dir:
            lines.append(f"task folder: {self.task_dir}")
        if self.workspace_tree:
            lines += ["workspace:", self.workspace_tree]
        if self.session:
            lines.append(f"session: {self.session}")
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


_CUT_KEYS = ("stdout_bytes", "stderr_bytes")
# The report fields, in the order their keys appear in the JSON.
_REPORT_FIELDS = (
    "approval",
    "workspace_bytes",
    "refused_after_cancel",
    "left_running",
    "files_not_carried",
    "checkpoint",
    "restored",
    "stdout_file",
    "task_dir",
    "workspace_tree",
    "grants",
    "cancelled_before",
    "saved_files",
    "loss",
)
# The fields ``to_dict`` does not copy as they are.
_NOT_PLAIN = frozenset({"captured_stdout", *_REPORT_FIELDS})
# The reports whose JSON is the value itself.
_PLAIN_REPORTS = frozenset(_REPORT_FIELDS) - {"approval", "restored", "cancelled_before", "loss"}
# Facts kept for scripts (``to_dict``) that the model does not need on every result.
_UNSTRUCTURED_REPORTS = frozenset({"workspace_bytes"})


def _marker(n: int) -> str:
    return f"[... {n:,} bytes omitted ...]"


# Output up to this many times the tail's size is shown whole: cutting a little saves a few
# tokens but costs the model another round to read the rest.
WHOLE_OUTPUT_FACTOR = 2


def clip_tail(stream: HeadTail, chars: int) -> tuple[str, int]:
    """All of the text when it is short (up to ``WHOLE_OUTPUT_FACTOR * chars`` characters),
    else the last ``chars`` characters with a marker for what was dropped before them."""
    head, tail, dropped = stream.text()
    if dropped == 0:
        text = head + tail
        if len(text) <= chars * WHOLE_OUTPUT_FACTOR:
            return text, 0
        cut = len(text[:-chars].encode("utf-8", "replace"))
        return _marker(cut) + "\n" + text[-chars:], cut
    cut = stream.total - len(tail[-chars:].encode("utf-8", "replace"))
    return _marker(cut) + "\n" + tail[-chars:], cut


def whole_text(stream: HeadTail) -> str:
    """Everything kept of a stream: all of it, or its head and tail with a marker between."""
    head, tail, dropped = stream.text()
    return head + tail if dropped == 0 else f"{head}\n{_marker(dropped)}\n{tail}"


def clip_head_tail(stream: HeadTail, head_chars: int, tail_chars: int) -> tuple[str, int]:
    head, tail, dropped = stream.text()
    text = head + tail if dropped == 0 else None
    if text is not None and len(text) <= head_chars + tail_chars:
        return text, 0
    first = (text if text is not None else head)[:head_chars]
    last = (text if text is not None else tail)[-tail_chars:]
    omitted = (
        stream.total - len(first.encode("utf-8", "replace")) - len(last.encode("utf-8", "replace"))
    )
    return f"{first}\n{_marker(max(omitted, 0))}\n{last}", max(omitted, 0)


def make_hint(result: ExecutionResult, timeout_s: float) -> str:
    reset = " The sandbox was restarted: variables and workspace files are gone."
    if result.status == "cancelled":
        calls = result.tool_calls.get("count", 0)
        return (
            f"Cancelled by the client after {calls} tool call(s); no call started after the "
            "cancel." + (reset if result.sandbox_reset else " Variables and files are kept.")
        )
    if result.status == "timeout":
        return (
            f"Timed out after {timeout_s:g} s.{reset} Do less per execution or work on smaller "
            "pieces."
        )
    if result.status == "limit":
        advice = {
            "memory": "Hit the memory limit. Work in chunks; free what you no longer need.",
            "processes": "Hit the process limit. Start fewer processes or threads.",
            "cpu_time": "Hit the CPU time limit. Use a cheaper algorithm or less data.",
            "workspace_inodes": "Too many files in the workspace. Write fewer, larger files.",
            "sandbox_exit": "The interpreter exited (os._exit or a crash).",
            "sandbox_gone": "The sandbox had ended before this code ran (stopped from outside): "
            "none of it ran; run it again.",
        }.get(result.limit or "", "Hit a sandbox limit.")
        return advice + reset
    error = result.error
    if result.status == "error" and error:
        kind = error.get("type", "")
        line = f" at line {error['line']}" if error.get("line") else ""
        if kind == "ToolError":
            return (
                "A tool call failed: read the message; check arguments with help(module.function)."
            )
        if kind in ("SyntaxError", "IndentationError", "TabError"):
            return f"Fix the syntax{line} and run again."
        if kind in ("ModuleNotFoundError", "ImportError") and "servers" in error.get("message", ""):
            return "Use search to find the right server and function names."
        if kind == "NameError":
            return (
                f"Undefined name{line}. Variables persist only from executions that ran "
                "without an error before that point."
            )
        return f"Fix the {kind}{line} and run again; state from before the error is kept."
    if result.truncated.get("stdout_bytes"):
        return "Output was cut: print only what you need; keep large data in variables or files."
    if not result.stdout and result.status == "ok":
        return "No output: print() what you want to see."
    return ""

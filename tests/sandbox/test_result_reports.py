"""The result's reports are typed fields, and the JSON a client sees is the same as when they
were keys of an untyped ``extra`` dict: each report is a top-level key of its own name."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from codemode.policy.approval import ApprovalRequest, ValuesSent
from codemode.replicas.wire import result_from_json, result_to_json
from codemode.sandbox.reports import CancelReport, Restore, SessionLoss
from codemode.sandbox.result import ExecutionResult

BASE: dict[str, Any] = {
    "status": "ok",
    "exit_code": 0,
    "stdout": "done\n",
    "stderr": "",
    "error": None,
    "files": {"created": ["a.txt"], "modified": [], "deleted": []},
    "tool_calls": {"count": 0, "failures": 0, "by_tool": {}},
    "duration_ms": 12.34,
    "truncated": {"stdout_bytes": 0, "stderr_bytes": 0},
    "hint": "",
    "session": "s_abc",
}

CANCELLED = CancelReport(
    status="cancelled",
    tool_calls={"count": 1, "failures": 0},
    refused_after_cancel=2,
    stdout="partial\n",
    error={"type": "KeyboardInterrupt", "message": ""},
    sandbox_reset=False,
    duration_ms=5.0,
)

# Every report, typed, and the JSON it was (the key and value the old ``extra`` dict held).
REPORTS: list[tuple[str, Any, dict[str, Any]]] = [
    ("workspace_bytes", 4096, {"workspace_bytes": 4096}),
    ("refused_after_cancel", 3, {"refused_after_cancel": 3}),
    ("left_running", "1 thread(s)", {"left_running": "1 thread(s)"}),
    ("files_not_carried", ["big.bin"], {"files_not_carried": ["big.bin"]}),
    ("checkpoint", "not saved: too large", {"checkpoint": "not saved: too large"}),
    (
        "restored",
        Restore(["notes.txt"], ["totals"], "idle", taken_at=1700000000.5),
        {
            "restored": {
                "files": ["notes.txt"],
                "variables": ["totals"],
                "taken_at": 1700000000.5,
                "reason": "idle",
            }
        },
    ),
    (
        "restored",
        Restore(["a.py"], [], "idle", taken_at=1.5, packages=["tinylib", "rich"]),
        {
            "restored": {
                "files": ["a.py"],
                "variables": [],
                "packages": ["tinylib", "rich"],
                "taken_at": 1.5,
                "reason": "idle",
            }
        },
    ),
    (
        "restored",
        Restore([], [], "lost", error="its checkpoint could not be read: bad"),
        {
            "restored": {
                "files": [],
                "variables": [],
                "reason": "lost",
                "error": "its checkpoint could not be read: bad",
            }
        },
    ),
    ("stdout_file", "output/001.txt", {"stdout_file": "output/001.txt"}),
    ("task_dir", "tasks/001", {"task_dir": "tasks/001"}),
    ("workspace_tree", "tasks/\n  001/", {"workspace_tree": "tasks/\n  001/"}),
    (
        "grants",
        [{"scope": "tool", "target": "desk.close", "kind": "destructive"}],
        {"grants": [{"scope": "tool", "target": "desk.close", "kind": "destructive"}]},
    ),
    (
        "cancelled_before",
        CANCELLED,
        {
            "cancelled_before": {
                "status": "cancelled",
                "tool_calls": {"count": 1, "failures": 0},
                "refused_after_cancel": 2,
                "stdout": "partial\n",
                "error": {"type": "KeyboardInterrupt", "message": ""},
                "sandbox_reset": False,
                "duration_ms": 5.0,
            }
        },
    ),
    ("saved_files", {"a.txt": "/tmp/out/a.txt"}, {"saved_files": {"a.txt": "/tmp/out/a.txt"}}),
    ("loss", SessionLoss("node-2", True), {"node": "node-2", "ran": True}),
]


def test_the_result_has_no_untyped_bag() -> None:
    result = ExecutionResult(**BASE)
    assert not hasattr(result, "extra")
    assert "extra" not in {item.name for item in dataclasses.fields(ExecutionResult)}
    assert "extra" not in result.to_dict()
    with pytest.raises(TypeError):
        ExecutionResult(**BASE, extra={"task_dir": "x"})  # type: ignore[call-arg]


def test_no_report_no_key() -> None:
    data = ExecutionResult(**BASE).to_dict()
    assert set(data) == set(BASE) | {"sandbox_reset"}


@pytest.mark.parametrize(("name", "value", "json_form"), REPORTS)
def test_each_report_is_a_typed_field_with_its_json_unchanged(
    name: str, value: Any, json_form: dict[str, Any]
) -> None:
    result = ExecutionResult(**BASE, **{name: value})
    assert getattr(result, name) == value
    data = result.to_dict()
    assert {key: data[key] for key in json_form} == json_form
    assert set(data) == set(BASE) | {"sandbox_reset"} | set(json_form)
    structured = result.to_structured()
    shown = {key: v for key, v in json_form.items() if v and key != "workspace_bytes"}
    assert {key: structured[key] for key in structured if key not in BASE} == shown
    # A replica hands the result on as JSON: the typed report comes back whole.
    back = result_from_json(json.loads(result_to_json(result))["result"])
    assert getattr(back, name) == value and back.to_dict() == data


def test_reports_appear_after_the_plain_fields_in_a_fixed_order() -> None:
    every = {name: value for name, value, _ in REPORTS}
    data = ExecutionResult(**BASE, **every).to_dict()
    keys = list(data)
    assert keys[: len(BASE) + 1] == [*BASE, "sandbox_reset"]
    assert keys[len(BASE) + 1 :] == [
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
        "node",
        "ran",
    ]


def test_the_project_reports_are_rendered_as_text() -> None:
    text = ExecutionResult(**BASE, task_dir="tasks/001", workspace_tree="tasks/\n  001/")
    assert text.render_text().splitlines()[-5:] == [
        "task folder: tasks/001",
        "workspace:",
        "tasks/",
        "  001/",
        "session: s_abc",
    ]


APPROVAL = ApprovalRequest(
    id="ap_1",
    tool="mail.send",
    arguments={"to": "<EMAIL_1>"},
    reason="mail.send is marked destructive",
    digest="sha256:abc",
    chars=18,
    values=ValuesSent("mail.send", {"crm": ["<EMAIL_1>"]}),
    file="/state/approvals/ap_1.json",
)


def test_a_paused_result_carries_the_request_as_the_json_it_was() -> None:
    paused = ExecutionResult.approval_required(APPROVAL, "s_abc", 3.0, printed="before\n")
    expected = {
        "id": "ap_1",
        "tool": "mail.send",
        "arguments": {"to": "<EMAIL_1>"},
        "digest": "sha256:abc",
        "chars": 18,
        "reason": "mail.send is marked destructive",
        "values": {"to": "mail.send", "from": {"crm": ["<EMAIL_1>"]}},
        "file": "/state/approvals/ap_1.json",
    }
    assert paused.to_dict()["approval"] == expected
    assert paused.to_structured()["approval"] == expected
    assert ApprovalRequest.from_dict(expected) == APPROVAL
    assert paused.render_text().splitlines() == [
        "status: approval_required",
        "stdout:",
        "before",
        'approval needed: mail.send({"to": "<EMAIL_1>"})',
        "digest: sha256:abc",
        "full arguments: /state/approvals/ap_1.json",
        "sends values from crm: <EMAIL_1>",
        "reason: mail.send is marked destructive",
        "approval: ap_1",
        "session: s_abc",
        f"hint: {paused.hint}",
    ]

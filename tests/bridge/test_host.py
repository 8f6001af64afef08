"""BridgeHost: grants, late frames, error mapping, call statistics."""

from __future__ import annotations

import time
from typing import Any

from codemode.bridge.host import BridgeHost, ModuleSource, ToolAccess
from codemode.errors import ToolError
from codemode.testing import RecordingInvoker
from codemode.tools import ToolCall


def _fail(call: ToolCall) -> Any:
    raise ToolError("upstream said no")


def _crash(call: ToolCall) -> Any:
    raise RuntimeError("secret internal detail")


def _sum(call: ToolCall) -> Any:
    return {"sum": call.arguments["a"] + call.arguments["b"]}


class Modules:
    def module_source(self, fullname: str) -> ModuleSource | None:
        if fullname == "servers":
            return ModuleSource("X = 1\n", True, "servers/__init__.py")
        return None


def make_host(**kwargs: Any) -> tuple[BridgeHost, RecordingInvoker]:
    invoker = RecordingInvoker({"fail": _fail, "crash": _crash}, default=_sum)
    host = BridgeHost(7, ToolAccess(invoker, Modules(), **kwargs), deadline=time.monotonic() + 10)
    return host, invoker


def call(tool: str, *, exec_id: int = 7, request_id: int = 1, args: Any = None) -> dict[str, Any]:
    return {
        "op": "call",
        "id": request_id,
        "exec": exec_id,
        "server": "math",
        "tool": tool,
        "args": {"a": 1, "b": 2} if args is None else args,
    }


def test_granted_call_reaches_the_invoker_and_is_counted():
    host, invoker = make_host()
    reply = host.handle(call("add"))
    assert reply == {"op": "reply", "id": 1, "ok": True, "value": {"sum": 3}}
    assert invoker.calls == [ToolCall("math", "add", {"a": 1, "b": 2})]
    assert host.stats.to_dict()["by_tool"] == {"math.add": {"calls": 1, "failures": 0}}


def test_call_outside_the_grant_is_refused_without_invoking():
    host, invoker = make_host(grant=lambda server, tool: tool != "drop_db")
    reply = host.handle(call("drop_db"))
    assert reply["ok"] is False
    assert reply["error"]["code"] == "tool_not_granted"
    assert invoker.calls == []
    assert host.stats.failures == 1
    assert host.stats.to_dict()["refused"] == 1  # reported in the result's tool_calls


def test_tool_errors_carry_the_upstream_message_and_internal_errors_do_not_leak():
    host, _ = make_host()
    failed = host.handle(call("fail"))
    crashed = host.handle(call("crash", request_id=2))
    assert failed["error"] == {"code": "tool_error", "message": "upstream said no"}
    assert "secret internal detail" not in crashed["error"]["message"]
    assert host.stats.failures == 2


def test_frames_for_another_execution_or_after_close_are_refused():
    host, invoker = make_host()
    assert host.handle(call("add", exec_id=6))["error"]["code"] == "late_frame"
    host.close()
    assert host.handle(call("add"))["error"]["code"] == "late_frame"
    assert invoker.calls == []


def test_malformed_requests_get_error_replies():
    host, _ = make_host()
    assert host.handle({"op": "call"})["error"]["code"] == "bad_frame"
    assert host.handle(call("add", args=[1, 2]))["error"]["code"] == "bad_frame"
    assert host.handle({"op": "nope", "id": 3, "exec": 7})["error"]["code"] == "bad_frame"


def test_imports_are_served_from_the_module_provider():
    host, _ = make_host()
    ok = host.handle({"op": "import", "id": 1, "exec": 7, "name": "servers"})
    missing = host.handle({"op": "import", "id": 2, "exec": 7, "name": "servers.nope"})
    assert ok["value"] == {"source": "X = 1\n", "package": True, "filename": "servers/__init__.py"}
    assert missing["error"]["code"] == "module_not_found"


def test_distinct_names_counted_are_bounded() -> None:
    from codemode.bridge.host import OTHER_TOOLS, TRACKED_NAMES, BridgeHost, ToolAccess

    bridge = BridgeHost(1, ToolAccess(grant=lambda server, tool: False), deadline=float("inf"))
    for n in range(TRACKED_NAMES + 100):
        reply = bridge.handle(
            {"op": "call", "id": n, "exec": 1, "server": "s", "tool": f"t{n}", "args": {}}
        )
        assert reply["error"]["code"] == "tool_not_granted"
    assert len(bridge.stats.by_tool) == TRACKED_NAMES + 1
    assert bridge.stats.by_tool[OTHER_TOOLS] == 100
    assert bridge.stats.failed_by_tool[OTHER_TOOLS] == 100
    assert bridge.stats.by_tool["s.t0"] == 1  # a name seen early keeps its own count


def test_overlong_names_are_refused_before_counting() -> None:
    from codemode.bridge.host import MAX_NAME_CHARS, BridgeHost, ToolAccess

    bridge = BridgeHost(1, ToolAccess(), deadline=float("inf"))
    reply = bridge.handle(
        {
            "op": "call",
            "id": 1,
            "exec": 1,
            "server": "s" * (MAX_NAME_CHARS + 1),
            "tool": "t",
            "args": {},
        }
    )
    assert reply["error"]["code"] == "bad_frame"
    assert "at most 200 characters" in reply["error"]["message"]
    assert bridge.stats.count == 0 and not bridge.stats.by_tool

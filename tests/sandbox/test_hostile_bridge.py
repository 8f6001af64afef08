"""Attacks on the bridge from inside: forged, malformed, oversized, replayed and late frames,
tools not granted, huge and deeply nested arguments. The host answers each with an error reply
or ends the execution with a clean status; it never crashes, and the next execution works.

Raw frames go through the guest's own socket: ``sys.modules["servers._runtime"].bridge.sock``.
"""

from __future__ import annotations

from typing import Any

import pytest

from codemode.bridge.host import ToolAccess
from codemode.sandbox import SandboxSession
from codemode.testing import RecordingInvoker
from codemode.tools import ToolCall

pytestmark = pytest.mark.hostile


def _sizes(call: ToolCall) -> dict[str, Any]:
    data = call.arguments.get("data")
    return {"len": len(data) if isinstance(data, str | bytes) else None}


def recorder() -> RecordingInvoker:
    """Host tools: every tool returns its ``data`` argument's size; every call is recorded."""
    return RecordingInvoker(default=_sizes)


RAW = """
import struct, sys
rt = sys.modules["servers._runtime"]
from _codemode_guest import wire
sock = rt.bridge.sock
def raw(data):
    with rt.bridge.lock:
        sock.sendall(data)
        return wire.read_frame(sock)
def frame(obj):
    return raw(wire.encode_frame(obj))
EXEC = rt.bridge.execution
"""

MALFORMED = {
    "garbage body": ("raw(struct.pack('>I', 5) + b'\\xc1\\xc1\\xc1\\xc1\\xc1')", "bad_frame"),
    "empty frame": ("raw(struct.pack('>I', 0))", "bad_frame"),
    "truncated msgpack": ("raw(struct.pack('>I', 3) + b'\\x82\\xa2o')", "bad_frame"),
    "not a map": ("raw(wire.encode_frame([1, 2, 3]))", "bad_frame"),
    "a bare string": ("raw(wire.encode_frame('call'))", "bad_frame"),
    "extension type": ("raw(struct.pack('>I', 3) + b'\\xd4\\x05\\x00')", "bad_frame"),
    "non-string map key": ("raw(struct.pack('>I', 3) + b'\\x81\\x01\\x02')", "bad_frame"),
    "invalid utf-8": ("raw(struct.pack('>I', 4) + b'\\x81\\xa1\\xff\\xc0')", "bad_frame"),
    "no id": ("frame({'op': 'call', 'exec': EXEC, 'server': 't', 'tool': 'echo', 'args': {}})",
              "bad_frame"),
    "string id": ("frame({'op': 'call', 'id': 'x', 'exec': EXEC, 'server': 't', 'tool': 'echo',"
                  " 'args': {}})", "bad_frame"),
    "unknown op": ("frame({'op': 'shell', 'id': 7, 'exec': EXEC, 'cmd': 'id'})", "bad_frame"),
    "args not a map": ("frame({'op': 'call', 'id': 7, 'exec': EXEC, 'server': 't', "
                       "'tool': 'echo', 'args': [1]})", "bad_frame"),
    "server not a string": ("frame({'op': 'call', 'id': 7, 'exec': EXEC, 'server': 1, "
                            "'tool': 'echo', 'args': {}})", "bad_frame"),
    "wrong execution id": ("frame({'op': 'call', 'id': 7, 'exec': EXEC + 5, 'server': 't', "
                           "'tool': 'echo', 'args': {}})", "late_frame"),
    "awaitable call of another execution": ("frame({'op': 'call', 'async': True, 'id': 7, "
                                            "'exec': EXEC + 5, 'server': 't', 'tool': 'echo', "
                                            "'args': {}})", "late_frame"),
    "awaitable call, args not a map": ("frame({'op': 'call', 'async': True, 'id': 7, "
                                       "'exec': EXEC, 'server': 't', 'tool': 'echo', "
                                       "'args': 5})", "bad_frame"),
    "previous execution id": ("frame({'op': 'call', 'id': 7, 'exec': EXEC - 1, 'server': 't', "
                              "'tool': 'echo', 'args': {}})", "late_frame"),
    "forged done of another execution": ("frame({'op': 'done', 'id': 7, 'exec': EXEC + 1, "
                                         "'exit_code': 0})", "late_frame"),
    "forged exec frame": ("frame({'op': 'exec', 'id': 7, 'exec': EXEC, 'code': 'print(1)'})",
                          "bad_frame"),
    "forged reply": ("frame({'op': 'reply', 'id': 7, 'exec': EXEC, 'ok': True, 'value': 1})",
                     "bad_frame"),
    "deep nesting (100k arrays)": ("raw(struct.pack('>I', 100001) + b'\\x91' * 100000 + b'\\xc0')",
                                   "bad_frame"),
    "nesting over the cap": ("frame({'op': 'call', 'id': 7, 'exec': EXEC, 'server': 't', "
                             "'tool': 'echo', 'args': {'a': eval('[' * 80 + ']' * 80)}})",
                             "bad_frame"),
    "claimed 4 billion element array": ("raw(struct.pack('>I', 5) + b'\\xdd\\xff\\xff\\xff\\xff')",
                                        "bad_frame"),
}  # fmt: skip


@pytest.mark.parametrize(("attack", "code"), MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_and_forged_frames_get_an_error_reply(
    isolated_session: SandboxSession, host, attack: str, code: str
) -> None:
    tools = recorder()
    payload = RAW + f"reply = {attack}\nprint('RESULT:', reply.get('ok'), reply['error']['code'])"
    result = isolated_session.execute(payload, tools=ToolAccess(tools), timeout_s=5)
    assert result.stdout == f"RESULT: False {code}\n", result.to_dict()
    assert tools.calls == []
    host.next_execution_works(isolated_session)
    # The bridge is still in sync for normal calls afterwards.
    ok = isolated_session.execute(
        "from servers._runtime import call_tool\nprint(call_tool('t', 'echo', {'data': 'abc'}))",
        tools=ToolAccess(tools),
        timeout_s=5,
    )
    assert ok.stdout == "{'len': 3}\n", ok.to_dict()


def test_oversized_length_prefix(isolated_session: SandboxSession, host) -> None:
    # The host reports the oversized frame, then skips the 4 GiB body it announced: the guest
    # desynchronised its own channel, so its "done" is swallowed and the execution times out.
    payload = RAW + "reply = raw(struct.pack('>I', 0xFFFFFFFF))\nprint(reply['error']['code'])"
    result = isolated_session.execute(payload, timeout_s=2)
    assert (result.status, result.limit) == ("timeout", "wall_time"), result.to_dict()
    assert result.stdout == "bad_frame\n"
    assert result.sandbox_reset is True
    host.next_execution_works(isolated_session)


def test_frame_over_the_size_cap_is_refused_and_stream_stays_in_sync(
    isolated_session: SandboxSession, host
) -> None:
    tools = recorder()
    code = """
from servers._runtime import call_tool, ToolError
try:
    call_tool("t", "echo", {"data": "x" * (70 << 20)})
    print("RESULT: ESCAPED")
except ToolError:
    print("RESULT: BLOCKED")
print(call_tool("t", "echo", {"data": "after"}))
"""
    result = isolated_session.execute(code, tools=ToolAccess(tools), timeout_s=10)
    # The host's error reply carries no id (the frame was never decoded), so the guest reports
    # the call as failed; the next call shows the stream is still in sync.
    assert result.stdout == "RESULT: BLOCKED\n{'len': 5}\n", result.to_dict()
    assert len(tools.calls) == 1
    host.next_execution_works(isolated_session)


def test_huge_tool_argument_passes_intact(isolated_session: SandboxSession, host) -> None:
    tools = recorder()
    code = "from servers._runtime import call_tool\nprint(call_tool('t', 'echo', {'data': 'y' * (20 << 20)}))"
    result = isolated_session.execute(code, tools=ToolAccess(tools), timeout_s=10)
    assert result.stdout == f"{{'len': {20 << 20}}}\n", result.to_dict()
    host.next_execution_works(isolated_session)


@pytest.mark.parametrize("depth", [70, 1000, 100_000])
def test_deeply_nested_arguments(isolated_session: SandboxSession, host, depth: int) -> None:
    tools = recorder()
    code = f"""
from servers._runtime import call_tool, ToolError
value = []
for _ in range({depth}):
    value = [value]
try:
    call_tool("t", "echo", {{"data": value}})
    print("RESULT: ESCAPED")
except ToolError:
    print("RESULT: BLOCKED ToolError")
except RecursionError:
    print("RESULT: BLOCKED RecursionError")
"""
    result = isolated_session.execute(code, tools=ToolAccess(tools), timeout_s=10)
    assert result.stdout in ("RESULT: BLOCKED ToolError\n", "RESULT: BLOCKED RecursionError\n")
    assert tools.calls == []
    host.next_execution_works(isolated_session)


def test_tools_not_granted_are_refused(isolated_session: SandboxSession, host) -> None:
    tools = recorder()
    code = """
from servers._runtime import call_tool, ToolError
print(call_tool("public", "echo", {"data": "a"}))
for server, tool in (("secret", "read"), ("public", "delete"), ("public", "echo "), ("", "")):
    try:
        call_tool(server, tool, {})
        print("ESCAPED", server, tool)
    except ToolError as error:
        print("BLOCKED", error.code)
"""
    result = isolated_session.execute(
        code,
        tools=ToolAccess(tools, grant=lambda server, tool: (server, tool) == ("public", "echo")),
    )
    assert result.stdout == "{'len': 1}\n" + "BLOCKED tool_not_granted\n" * 4, result.stdout
    assert [(c.server, c.tool) for c in tools.calls] == [("public", "echo")]
    assert result.tool_calls["count"] == 5
    assert result.tool_calls["failures"] == 4
    host.next_execution_works(isolated_session)


def test_raw_frame_cannot_bypass_the_grant(isolated_session: SandboxSession, host) -> None:
    tools = recorder()
    payload = RAW + (
        "reply = frame({'op': 'call', 'id': 99, 'exec': EXEC, 'server': 'secret', "
        "'tool': 'read', 'args': {}})\nprint(reply['ok'], reply['error']['code'])"
    )
    result = isolated_session.execute(
        payload, tools=ToolAccess(tools, grant=lambda server, tool: server == "public")
    )
    assert result.stdout == "False tool_not_granted\n", result.to_dict()
    assert tools.calls == []
    host.next_execution_works(isolated_session)


def test_replayed_call_frames_are_each_answered(isolated_session: SandboxSession, host) -> None:
    tools = recorder()
    payload = (
        RAW
        + """
call = {"op": "call", "id": 4242, "exec": EXEC, "server": "t", "tool": "echo", "args": {"data": "r"}}
replies = [frame(dict(call)) for _ in range(3)]
print([(r["id"], r["ok"]) for r in replies])
"""
    )
    result = isolated_session.execute(payload, tools=ToolAccess(tools), timeout_s=5)
    # A replay is just another call of the same execution: answered, counted, never confusing.
    assert result.stdout == "[(4242, True), (4242, True), (4242, True)]\n", result.to_dict()
    assert len(tools.calls) == 3
    assert result.tool_calls["count"] == 3
    host.next_execution_works(isolated_session)


def test_replayed_frame_in_a_later_execution_is_refused(
    isolated_session: SandboxSession, host
) -> None:
    tools = recorder()
    first = isolated_session.execute(
        RAW + "saved = {'op': 'call', 'id': 5, 'exec': EXEC, 'server': 't', 'tool': 'echo', "
        "'args': {}}\nprint(frame(dict(saved))['ok'])",
        tools=ToolAccess(tools),
    )
    assert first.stdout == "True\n"
    second = isolated_session.execute(
        RAW + "r = frame(dict(saved))\nprint(r['ok'], r['error']['code'])", tools=ToolAccess(tools)
    )
    assert second.stdout == "False late_frame\n", second.to_dict()
    assert len(tools.calls) == 1
    host.next_execution_works(isolated_session)


def test_call_carrying_an_ended_execution_id_is_refused(
    isolated_session: SandboxSession, host
) -> None:
    tools = recorder()
    result = isolated_session.execute(
        RAW
        + """
reply = frame({"op": "call", "id": 77, "exec": EXEC - 1, "server": "t", "tool": "echo",
               "args": {}})
print(reply["ok"], reply["error"]["code"])
""",
        tools=ToolAccess(tools),
        timeout_s=5,
    )
    assert result.stdout == "False late_frame\n", result.to_dict()
    assert tools.calls == []
    host.next_execution_works(isolated_session)


def test_forged_done_mid_execution_ends_it_cleanly(isolated_session: SandboxSession, host) -> None:
    payload = (
        RAW
        + """
from _codemode_guest import wire
sock.sendall(wire.encode_frame({"op": "done", "exec": EXEC, "exit_code": 0, "error": None,
    "files": {"created": ["/etc/shadow", 7], "modified": "x", "deleted": None}}))
print("after forged done")
"""
    )
    result = isolated_session.execute(payload, timeout_s=5)
    # The host takes the first "done" of this execution, but lists the files itself: the
    # names the guest claimed are not in the result.
    assert result.status == "ok"
    assert result.files == {"created": [], "modified": [], "deleted": []}
    # The real "done" that follows is refused as late by the next execution, not confused;
    # output the code wrote after its forged "done" may show up in that next result.
    after = isolated_session.execute("print('ok')", timeout_s=5)
    assert after.status == "ok" and after.stdout.endswith("ok\n"), after.to_dict()
    assert "after forged done" in result.stdout + after.stdout
    host.next_execution_works(isolated_session)


def test_forged_done_then_busy_code_does_not_block_the_next_execution(
    isolated_session: SandboxSession, host
) -> None:
    """After a forged "done" the code keeps running; the next execution notices the busy
    sandbox (CPU used or still running while idle), replaces it, and runs normally."""
    payload = (
        RAW
        + """
from _codemode_guest import wire
sock.sendall(wire.encode_frame({"op": "done", "exec": EXEC, "exit_code": 0}))
while True:
    pass
"""
    )
    result = isolated_session.execute(payload, timeout_s=3)
    assert result.status == "ok"
    after = isolated_session.execute("print('ok')", timeout_s=2)
    assert (after.status, after.stdout) == ("ok", "ok\n"), after.to_dict()


def test_garbage_flood_on_the_bridge(isolated_session: SandboxSession, host) -> None:
    payload = (
        RAW
        + """
import os
sock.sendall(os.urandom(8 << 20))
print("sent")
"""
    )
    result = isolated_session.execute(payload, timeout_s=3)
    # Random bytes desynchronise the guest's own channel: a clean status, never a host crash.
    assert result.status in ("timeout", "limit", "ok"), result.to_dict()
    assert result.stdout == "sent\n"
    host.next_execution_works(isolated_session)


def test_bridge_socket_closed_by_the_code(isolated_session: SandboxSession, host) -> None:
    payload = RAW + "import socket\nsock.shutdown(socket.SHUT_RDWR)\nprint('closed')"
    result = isolated_session.execute(payload, timeout_s=3)
    assert (result.status, result.limit) in (("limit", "sandbox_exit"), ("timeout", "wall_time"))
    assert result.sandbox_reset is True
    host.next_execution_works(isolated_session)


FLOOD = """
sent = 3000
with rt.bridge.lock:
    for i in range(sent):
        sock.sendall(wire.encode_frame({'op': 'call', 'async': True, 'id': 10**6 + i,
                                        'exec': EXEC, 'server': 't', 'tool': 'echo',
                                        'args': {'data': 'x'}}))
    ids = sorted(wire.read_frame(sock)['id'] for _ in range(sent))
print('RESULT:', ids == list(range(10**6, 10**6 + sent)))
"""


def test_a_flood_of_awaitable_calls_is_answered_once_each(
    isolated_session: SandboxSession, host
) -> None:
    """More awaitable calls than the workers take at once: the rest are answered in turn,
    every one exactly once, and the bridge stays in sync."""
    tools = recorder()
    result = isolated_session.execute(RAW + FLOOD, tools=ToolAccess(tools), timeout_s=30)
    assert result.stdout == "RESULT: True\n", result.to_dict()
    assert len(tools.calls) == 3000
    host.next_execution_works(isolated_session)


# Each distinct tool name a call carries is counted on the host until the execution ends: the
# code chooses them. Names past 200 characters are refused unread (the bound on how many
# distinct names are counted is tested in tests/bridge/test_host.py).
LONG_NAMES = """
seen = set()
for n in range(300):
    name = "s" * (1 << 20) + str(n)
    reply = frame({'op': 'call', 'id': 10**6 + n, 'exec': EXEC, 'server': name, 'tool': 't',
                   'args': {}})
    seen.add(reply['error']['code'])
print("RESULT:", sorted(seen))
"""


def test_megabyte_tool_names_are_refused_unread(isolated_session: SandboxSession, host) -> None:
    """300 calls naming a different 1 MiB server each: without the cap the host kept 300 MiB
    of names (a longer execution: gigabytes) until the execution ended."""
    tools = recorder()
    result = isolated_session.execute(
        RAW + LONG_NAMES, tools=ToolAccess(tools, grant=lambda s, t: True), timeout_s=30
    )
    assert result.stdout == "RESULT: ['bad_frame']\n", result.to_dict()
    assert tools.calls == []
    assert result.tool_calls["count"] == 0, result.tool_calls
    host.next_execution_works(isolated_session)

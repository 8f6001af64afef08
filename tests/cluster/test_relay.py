"""The remote sandbox's stream without Ray: a node agent in this process and the runner over
real TCP on 127.0.0.1, with real bubblewrap guests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from codemode.bridge.host import ToolAccess
from codemode.cluster.agent import NodeAgent
from codemode.cluster.remote import RemoteGuest, StreamLink
from codemode.errors import SandboxError, ToolError
from codemode.sandbox.isolation import require_isolation
from codemode.sandbox.runner import Sandbox
from codemode.tools import ToolCall
from tests.cluster.relay import SETTINGS, connect


class Tools:
    """Host-side tools: they run in the gateway (this process), never on the worker."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        self.calls.append(call)
        if call.tool == "add":
            return call.arguments["a"] + call.arguments["b"]
        raise ToolError(f"no such tool: {call.tool}")


def wait_until(condition: Any, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture(scope="module")
def agent() -> Iterator[NodeAgent]:
    agent = NodeAgent(SETTINGS.model_dump(mode="json"), slots=3, warm=1, accept_timeout_s=10)
    yield agent
    agent.close()


@pytest.fixture
def remote(agent: NodeAgent) -> Iterator[Sandbox]:
    sandbox = connect(agent)
    yield sandbox
    sandbox.kill()


def guest(sandbox: Sandbox) -> RemoteGuest:
    assert isinstance(sandbox.process, RemoteGuest)
    return sandbox.process


def test_the_remote_guest_is_isolated_like_a_local_one(remote: Sandbox):
    report = require_isolation(remote)
    assert report.facts["pid1_is_guest"] and not report.facts["inet_socket"]
    assert remote.guest_pid is None  # nothing of it runs on the gateway


def test_state_files_and_output_arrive_in_order(remote: Sandbox):
    assert remote.execute("x = 41").status == "ok"
    # Output written right before the end must be in this result, not the next one.
    code = (
        "import sys\nprint('o' * 200_000)\nprint('e' * 3000, file=sys.stderr)\n"
        "open('made.txt', 'w').write('hi')\nprint(x + 1)"
    )
    result = remote.execute(code)
    assert result.status == "ok", result.to_dict()
    assert result.stdout.endswith("42\n")
    assert result.truncated["stdout_total_bytes"] == 200_001 + 3
    assert result.truncated["stderr_total_bytes"] == 3001
    # Listed by the worker host from the stopped sandbox, not reported by the guest.
    assert result.files["created"] == ["made.txt"]
    assert result.workspace_bytes > 0
    again = remote.execute("print(open('made.txt').read())")
    assert (again.stdout, again.files["created"]) == ("hi\n", [])


def test_tool_calls_are_answered_by_the_gateway(remote: Sandbox):
    tools = Tools()
    code = (
        "from servers._runtime import call_tool, ToolError\n"
        "print(call_tool('math', 'add', {'a': 2, 'b': 3}))\n"
        "try:\n"
        "    call_tool('math', 'nope', {})\n"
        "except ToolError as error:\n"
        "    print('caught:', error)\n"
    )
    result = remote.execute(code, tools=ToolAccess(tools))
    assert result.stdout == "5\ncaught: no such tool: nope\n", result.to_dict()
    assert tools.calls[0] == ToolCall("math", "add", {"a": 2, "b": 3})
    assert result.tool_calls["count"] == 2


def test_oversized_frames_are_refused_on_the_gateway(remote: Sandbox):
    remote.bridge.decoder.max_frame_bytes = 1 << 16
    code = (
        "from servers._runtime import call_tool, ToolError\n"
        "try:\n"
        "    call_tool('math', 'add', {'a': 'x' * 200_000, 'b': ''})\n"
        "except ToolError as error:\n"
        "    print('refused')\n"
    )
    tools = Tools()
    result = remote.execute(code, tools=ToolAccess(tools))
    assert result.stdout.startswith("refused"), result.to_dict()
    assert tools.calls == [] and result.tool_calls["count"] == 0  # never reached a tool
    assert remote.execute("print('still here')").stdout == "still here\n"


def test_a_cancel_interrupts_the_code_on_the_worker(remote: Sandbox):
    cancel = threading.Event()

    def on_output(stream: str, data: bytes) -> None:
        if b"started" in data:
            cancel.set()

    code = "import time\nprint('started', flush=True)\ntry:\n    time.sleep(30)\nfinally:\n    print('bye')"
    result = remote.execute(code, on_output=on_output, cancel=cancel)
    assert result.status == "cancelled", result.to_dict()
    assert "bye" in result.stdout  # the KeyboardInterrupt reached the code: it ran its finally
    assert remote.execute("print('next')").stdout == "next\n"


def test_a_limit_kill_is_a_reset_not_a_lost_node(remote: Sandbox, agent: NodeAgent):
    result = remote.execute("while True: pass", timeout_s=1)
    assert (result.status, result.limit, result.sandbox_reset) == ("timeout", "wall_time", True)
    assert not guest(remote).lost


def test_a_guest_that_exits_is_not_a_lost_node(remote: Sandbox):
    result = remote.execute("import os\nos._exit(3)")
    assert (result.status, result.limit) == ("limit", "sandbox_exit")
    assert not guest(remote).lost


def test_a_dropped_stream_is_a_lost_node_and_the_worker_ends_the_guest(agent: NodeAgent):
    sandbox = connect(agent)
    link = guest(sandbox).link
    leased = agent.load()["leased"]

    def drop_when_running(stream: str, data: bytes) -> None:
        if b"running" in data:
            link.stream.shutdown(socket.SHUT_RDWR)  # the network to the worker is gone

    code = "import time\nprint('running', flush=True)\ntime.sleep(30)"
    try:
        result = sandbox.execute(code, timeout_s=20, on_output=drop_when_running)
        assert guest(sandbox).lost, result.to_dict()
        assert result.sandbox_reset and result.stdout == "running\n"
    finally:
        sandbox.kill()
    # The worker does not keep a guest whose gateway is gone: its slot is free again.
    assert wait_until(lambda: agent.load()["leased"] == leased - 1)


def test_only_the_token_holder_gets_the_stream(agent: NodeAgent):
    endpoint = agent.lease(SETTINGS.model_dump(mode="json"))
    assert endpoint is not None
    with socket.create_connection((endpoint["host"], endpoint["port"]), timeout=5) as intruder:
        intruder.sendall(b"\0" * 32)
        intruder.settimeout(5)
        assert intruder.recv(10) == b""  # closed on it
    link = StreamLink(endpoint["host"], endpoint["port"], bytes.fromhex(endpoint["token"]))
    sandbox = Sandbox(RemoteGuest(endpoint, SETTINGS.limits, link, "n"), SETTINGS.limits)
    try:
        sandbox.wait_ready(10)
        assert sandbox.execute("print(1)").stdout == "1\n"
    finally:
        sandbox.kill()


def test_a_full_node_leases_nothing_and_frees_slots_as_sandboxes_end():
    settings = SETTINGS.model_dump(mode="json")
    agent = NodeAgent(settings, slots=1, warm=0, accept_timeout_s=10)
    try:
        first = connect(agent)
        assert agent.lease(settings) is None
        first.kill()
        assert wait_until(lambda: agent.load()["leased"] == 0)
        second = connect(agent)
        assert second.execute("print(2)").stdout == "2\n"
        second.kill()
    finally:
        agent.close()


def test_a_lease_nobody_takes_is_ended():
    settings = SETTINGS.model_dump(mode="json")
    agent = NodeAgent(settings, slots=1, warm=0, accept_timeout_s=0.5)
    try:
        assert agent.lease(settings) is not None
        assert wait_until(lambda: agent.load()["leased"] == 0)
    finally:
        agent.close()


def test_an_unreachable_worker_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SandboxError, match="could not reach the sandbox's worker node"):
        StreamLink("127.0.0.1", port, b"\0" * 32, connect_timeout_s=2)


def test_the_cpu_limit_is_watched_over_the_stream(agent: NodeAgent):
    # Other limits than the agent's warm pool: a guest started for this lease.
    settings = SETTINGS.model_copy(update={"limits": SETTINGS.limits.model_copy(
        update={"cpu_time_s": 0.5, "wall_time_s": 20})})  # fmt: skip
    sandbox = connect(agent, settings)
    try:
        assert sandbox.execute("x = 1").status == "ok"
        result = sandbox.execute("while True: pass")
        assert (result.status, result.limit) == ("limit", "cpu_time"), result.to_dict()
        assert result.sandbox_reset and not guest(sandbox).lost
    finally:
        sandbox.kill()


def test_a_fresh_interpreter_gets_the_files_copied_on_the_worker(remote: Sandbox, agent: NodeAgent):
    first = remote.execute(
        "import os\nos.makedirs('d')\nopen('d/kept.txt', 'w').write('kept')\nsecret = 1"
    )
    assert first.status == "ok", first.to_dict()
    fresh = connect(agent, carry_from=guest(remote).token)
    try:
        found = fresh.process.facts.list_workspace()
        assert found is not None and "d/kept.txt" in found.snapshot
        result = fresh.execute("print(open('d/kept.txt').read(), 'secret' in globals())")
        assert result.stdout == "kept False\n", result.to_dict()
    finally:
        fresh.kill()


def test_carrying_from_an_unknown_lease_is_refused(agent: NodeAgent):
    with pytest.raises(SandboxError, match="not on this node any more"):
        agent.lease(SETTINGS.model_dump(mode="json"), "00" * 32)
    assert wait_until(lambda: agent.load()["leased"] == 0)

"""Sample attacks (tests/sandbox/hostile/) against sandboxes on a worker node, each only after
the worker's sandbox proved from inside that it is isolated (``require_isolation``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.bridge.host import ToolAccess
from codemode.cluster.provider import RaySandboxes
from codemode.cluster.session import RemoteSession
from codemode.sandbox.isolation import require_isolation
from tests.sandbox.test_hostile_bridge import FLOOD, MALFORMED, RAW, recorder

pytestmark = [pytest.mark.slow, pytest.mark.hostile]

HOSTILE_DIR = Path(__file__).parents[1] / "sandbox" / "hostile"


def payload(name: str) -> str:
    return (HOSTILE_DIR / f"{name}.py").read_text()


@pytest.fixture
def isolated_remote(ray_sandboxes: RaySandboxes) -> Iterator[RemoteSession]:
    session = ray_sandboxes.open("hostile")
    assert session.execute("pass").status == "ok"
    assert session.sandbox is not None
    require_isolation(session.sandbox)  # raises (the test fails) rather than attack unisolated
    yield session
    session.close()


def next_execution_works(session: RemoteSession) -> None:
    result = session.execute("print('ok')", timeout_s=10)
    assert (result.status, result.stdout) == ("ok", "ok\n"), result.to_dict()


def test_network_egress_is_blocked_on_the_worker(isolated_remote: RemoteSession):
    result = isolated_remote.execute(payload("network_egress"), timeout_s=10)
    assert (result.status, result.stdout) == ("ok", "RESULT: BLOCKED []\n"), result.to_dict()
    next_execution_works(isolated_remote)


def test_worker_files_cannot_be_read(isolated_remote: RemoteSession):
    result = isolated_remote.execute(payload("read_host_files"), timeout_s=10)
    assert (result.status, result.stdout) == ("ok", "RESULT: BLOCKED [] []\n"), result.to_dict()
    next_execution_works(isolated_remote)


def test_writes_outside_the_workspace_land_nowhere_on_the_worker(isolated_remote: RemoteSession):
    markers = [Path("/tmp/codemode-escape-marker"), Path("/var/tmp/codemode-escape-marker")]
    assert not any(m.exists() for m in markers)  # the workers run on this machine
    result = isolated_remote.execute(payload("write_outside"), timeout_s=10)
    # Only the sandbox's private /tmp, /dev/shm and its workspace took the writes.
    assert result.stdout == (
        "RESULT: ESCAPED? ['/tmp/codemode-escape-marker', '/dev/shm/codemode-escape-marker', "
        "'/workspace/codemode-escape-marker']\n"
    ), result.to_dict()
    assert result.files["created"] == ["codemode-escape-marker"]  # listed on the worker
    assert not any(m.exists() for m in markers)
    next_execution_works(isolated_remote)


def test_cpu_loop_times_out_on_the_worker(isolated_remote: RemoteSession):
    result = isolated_remote.execute(payload("cpu_loop"), timeout_s=2)
    assert (result.status, result.limit, result.sandbox_reset) == ("timeout", "wall_time", True)
    next_execution_works(isolated_remote)


def test_fork_bomb_is_contained_on_the_worker(isolated_remote: RemoteSession):
    result = isolated_remote.execute(payload("fork_bomb"), timeout_s=5)
    assert (result.status, result.limit) == ("limit", "processes"), result.to_dict()
    assert result.sandbox_reset
    next_execution_works(isolated_remote)


def test_memory_bomb_is_contained_on_the_worker(isolated_remote: RemoteSession):
    result = isolated_remote.execute(payload("memory_bomb"), timeout_s=10)
    assert (result.status, result.limit) == ("limit", "memory"), result.to_dict()
    next_execution_works(isolated_remote)


def test_huge_output_crosses_the_stream_and_is_capped_on_the_gateway(
    isolated_remote: RemoteSession,
):
    result = isolated_remote.execute(payload("huge_stdout"), timeout_s=30)
    assert result.status == "ok", result.to_dict()
    assert result.truncated["stdout_total_bytes"] == 200 << 20  # every byte was relayed
    assert "bytes omitted" in result.stdout and len(result.stdout) < 1200
    next_execution_works(isolated_remote)


# --- the bridge, decoded on the gateway after crossing the stream --------------------------


@pytest.mark.parametrize(("attack", "code"), MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_and_forged_frames_from_a_worker_get_an_error_reply(
    isolated_remote: RemoteSession, attack: str, code: str
):
    tools = recorder()
    attack_code = (
        RAW + f"reply = {attack}\nprint('RESULT:', reply.get('ok'), reply['error']['code'])"
    )
    result = isolated_remote.execute(attack_code, tools=ToolAccess(tools), timeout_s=5)
    assert result.stdout == f"RESULT: False {code}\n", result.to_dict()
    assert tools.calls == []
    ok = isolated_remote.execute(
        "from servers._runtime import call_tool\nprint(call_tool('t', 'echo', {'data': 'abc'}))",
        tools=ToolAccess(tools),
        timeout_s=5,
    )
    assert ok.stdout == "{'len': 3}\n", ok.to_dict()


def test_an_oversized_length_prefix_from_a_worker(isolated_remote: RemoteSession):
    attack = RAW + "reply = raw(struct.pack('>I', 0xFFFFFFFF))\nprint(reply['error']['code'])"
    result = isolated_remote.execute(attack, timeout_s=2)
    assert (result.status, result.limit) == ("timeout", "wall_time"), result.to_dict()
    assert result.stdout == "bad_frame\n" and result.sandbox_reset
    next_execution_works(isolated_remote)


def test_a_forged_done_then_busy_code_is_caught_on_the_worker(isolated_remote: RemoteSession):
    attack = RAW + (
        "from _codemode_guest import wire\n"
        "sock.sendall(wire.encode_frame({'op': 'done', 'exec': EXEC, 'exit_code': 0}))\n"
        "while True:\n    pass\n"
    )
    result = isolated_remote.execute(attack, timeout_s=3)
    # The worker saw the code still running after its "done": the sandbox is restarted.
    assert result.status == "ok" and result.left_running, result.to_dict()
    assert result.sandbox_reset
    next_execution_works(isolated_remote)


def test_a_garbage_flood_and_a_closed_bridge_from_a_worker(isolated_remote: RemoteSession):
    flood = RAW + "import os\nsock.sendall(os.urandom(8 << 20))\nprint('sent')"
    result = isolated_remote.execute(flood, timeout_s=3)
    assert result.status in ("timeout", "limit", "ok"), result.to_dict()
    assert result.stdout == "sent\n"
    next_execution_works(isolated_remote)
    closed = RAW + "import socket\nsock.shutdown(socket.SHUT_RDWR)\nprint('closed')"
    result = isolated_remote.execute(closed, timeout_s=3)
    assert (result.status, result.limit) in (("limit", "sandbox_exit"), ("timeout", "wall_time"))
    assert result.sandbox_reset
    next_execution_works(isolated_remote)


def test_a_flood_of_awaitable_calls_from_a_worker_is_answered_once_each(
    isolated_remote: RemoteSession,
):
    tools = recorder()
    result = isolated_remote.execute(RAW + FLOOD, tools=ToolAccess(tools), timeout_s=30)
    assert result.stdout == "RESULT: True\n", result.to_dict()
    assert len(tools.calls) == 3000
    next_execution_works(isolated_remote)

"""``UnsafeHostBackend`` (sandbox.unsafe_no_isolation = true): the same contract, no isolation.

Only honest code runs here: this backend has no isolation to test hostile code against.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator

import pytest

from codemode.bridge.host import ToolAccess
from codemode.sandbox import Limits, SandboxPool, SandboxSession, SandboxSettings
from codemode.sandbox.backends import UnsafeHostBackend, make_backend
from codemode.testing import RecordingInvoker
from codemode.tools import ToolCall


@pytest.fixture
def settings() -> SandboxSettings:
    return SandboxSettings(limits=Limits(wall_time_s=10), pool_size=1, unsafe_no_isolation=True)


@pytest.fixture
def session(settings: SandboxSettings) -> Iterator[SandboxSession]:
    with SandboxPool(make_backend(settings), 1).start() as pool:
        session = SandboxSession(pool, "unsafe")
        yield session
        session.close()


def test_the_flag_selects_the_unsafe_backend_and_says_it_is_not_isolated(settings) -> None:
    backend = make_backend(settings)
    assert isinstance(backend, UnsafeHostBackend)
    assert backend.isolated is False


def test_code_runs_and_state_persists(session: SandboxSession) -> None:
    first = session.execute("x = 41\nprint('hello')")
    assert (first.status, first.stdout, first.exit_code) == ("ok", "hello\n", 0)
    second = session.execute("print(x + 1)")
    assert second.stdout == "42\n"
    fresh = session.execute("print('x' in globals())", fresh=True)
    assert fresh.stdout == "False\n"


def test_errors_carry_type_and_line(session: SandboxSession) -> None:
    result = session.execute("a = 1\nraise ValueError('bad value')")
    assert result.status == "error"
    assert result.error is not None
    assert (result.error["type"], result.error["line"]) == ("ValueError", 2)
    assert "bad value" in result.error["message"]


def test_tool_calls_cross_the_bridge(session: SandboxSession) -> None:
    echo = RecordingInvoker({"t.echo": lambda call: {"echo": call.arguments}})
    code = "from servers._runtime import call_tool\nprint(call_tool('t', 'echo', {'a': 1}))"
    result = session.execute(code, tools=ToolAccess(echo))
    assert result.stdout == "{'echo': {'a': 1}}\n"
    assert echo.calls == [ToolCall("t", "echo", {"a": 1})]
    assert result.tool_calls["count"] == 1


def test_the_guest_sees_an_empty_environment_and_its_own_workspace(session) -> None:
    code = "import os\nprint(sorted(os.environ))\nprint(os.getcwd())\nopen('f.txt', 'w').write('x')"
    result = session.execute(code)
    names, cwd = result.stdout.splitlines()
    environment = set(ast.literal_eval(names))
    assert "HOME" in environment and not {"PYTHONPATH", "VIRTUAL_ENV"} & environment
    assert cwd != os.getcwd()
    assert result.files["created"] == ["f.txt"]


def test_a_timeout_kills_the_guest_and_the_next_execution_starts_fresh(session) -> None:
    result = session.execute("while True: pass", timeout_s=1)
    assert (result.status, result.limit, result.sandbox_reset) == ("timeout", "wall_time", True)
    assert session.execute("print('back')").stdout == "back\n"


def test_a_guest_dies_with_the_host_that_started_it(tmp_path) -> None:
    """A gateway killed mid-execution (SIGKILL: no cleanup runs) leaves no guest behind."""
    import signal
    import subprocess
    import sys
    import time

    host = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from codemode.sandbox import SandboxSettings\n"
            "from codemode.sandbox.backends import make_backend\n"
            "from codemode.sandbox.runner import Sandbox\n"
            "backend = make_backend(SandboxSettings(unsafe_no_isolation=True))\n"
            "sandbox = Sandbox(backend.spawn(), backend.limits)\n"
            "sandbox.wait_ready()\n"
            "print(sandbox.process.popen.pid, flush=True)\n"
            # Busy in the code: a guest that never reads its socket cannot notice EOF.
            "sandbox.execute('print(1, flush=True)\\nwhile True: pass', timeout_s=60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        # SIGKILL leaves the backend's folders behind: in the test's own, not in /tmp.
        env=dict(os.environ, TMPDIR=str(tmp_path)),
    )
    try:
        assert host.stdout is not None
        guest = int(host.stdout.readline())
        os.kill(guest, 0)  # running
        deadline = time.monotonic() + 10
        while _state(guest) != "R" and time.monotonic() < deadline:
            time.sleep(0.02)  # bounded: until the code spins
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(guest, 0)
        except ProcessLookupError:
            return
        if _state(guest) in ("Z", "?"):  # a zombie until init reaps it: gone
            return
        time.sleep(0.02)  # bounded wait for the kernel to deliver the death signal
    os.kill(guest, signal.SIGKILL)
    raise AssertionError("the guest outlived the host that started it")


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "?"

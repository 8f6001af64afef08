"""Two sessions running at once (host threads): neither sees the other's files, processes,
variables or /tmp, and neither can signal the other.

Session A is held mid-execution inside a host tool call (an Event, bounded), so B's probes
run while A's code is really running.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from codemode.bridge.host import ToolAccess
from codemode.sandbox import ExecutionResult, SandboxSession
from codemode.tools import ToolCall

pytestmark = pytest.mark.hostile

SECRET = f"secret-{uuid.uuid4().hex}"


class Gate:
    """A host tool that tells the test A is running, then holds A until released."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        self.inside.set()
        return self.release.wait(min(timeout_s, 20))


A_CODE = f"""
import os, subprocess
secret = {SECRET!r}
open("a-file.txt", "w").write(secret)
open("/tmp/a-tmp.txt", "w").write(secret)
child = subprocess.Popen(["sleep", "1000"])
from servers._runtime import call_tool
released = call_tool("gate", "hold", {{}})
alive = child.poll() is None
child.kill()
print("A", released, alive, open("a-file.txt").read() == secret)
"""

B_PROBE = f"""
import os, glob
needle = {SECRET!r}
seen = []
if "secret" in globals():
    seen.append("variable")
for path in glob.glob("/workspace/**", recursive=True) + glob.glob("/tmp/**", recursive=True):
    try:
        if os.path.isfile(path) and needle in open(path).read():
            seen.append(path)
    except OSError:
        pass
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
cmdlines = [open(f"/proc/{{p}}/cmdline", "rb").read() for p in pids]
if any(b"sleep" in c for c in cmdlines):
    seen.append("A's process")
if pids != sorted({{1, os.getpid()}}):
    seen.append(f"pids {{pids}}")
import signal
try:
    os.kill(-1, signal.SIGKILL)  # everything B may signal: only its own namespace
except ProcessLookupError:
    pass
print("RESULT:", "ESCAPED " + repr(seen) if seen else "BLOCKED")
"""


def test_concurrent_sessions_are_isolated(
    isolated_session: SandboxSession, second_isolated_session: SandboxSession, host
) -> None:
    a, b = isolated_session, second_isolated_session
    assert a.sandbox is not b.sandbox
    gate = Gate()
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(a.execute, A_CODE, tools=ToolAccess(gate), timeout_s=25)
        try:
            assert gate.inside.wait(15), "session A never reached its tool call"
            probe = b.execute(B_PROBE, timeout_s=10)
            # B ran while A was mid-execution: it saw none of A, and its kill(-1) stayed home.
            assert probe.stdout == "RESULT: BLOCKED\n", probe.to_dict()
        finally:
            gate.release.set()
        result_a: ExecutionResult = future.result(timeout=30)
    assert (result_a.status, result_a.stdout) == ("ok", "A True True True\n"), result_a.to_dict()
    # And the other way round: A does not see B's state either.
    b.execute(f"b_secret = {SECRET!r}\nopen('b.txt', 'w').write(b_secret)")
    check = a.execute(
        "import os\nprint('b_secret' in globals(), os.path.exists('b.txt'), "
        "os.path.exists('/tmp/a-tmp.txt'))"
    )
    assert check.stdout == "False False True\n"
    host.next_execution_works(a)
    host.next_execution_works(b)


def test_concurrent_hostile_loads_do_not_interfere(
    isolated_session: SandboxSession, second_isolated_session: SandboxSession, host
) -> None:
    a, b = isolated_session, second_isolated_session
    with ThreadPoolExecutor(2) as pool:
        bomb = pool.submit(
            a.execute,
            "import os\nwhile True:\n    try:\n        os.fork()\n"
            "    except OSError:\n        pass",
            timeout_s=5,
        )
        memory = pool.submit(
            b.execute, "x = []\nwhile True:\n    x.append(bytearray(64 << 20))", timeout_s=5
        )
        bomb_result, memory_result = bomb.result(timeout=20), memory.result(timeout=20)
    # Each sandbox hit its own limit; neither was charged for the other's.
    assert (bomb_result.status, bomb_result.limit) == ("limit", "processes")
    assert (memory_result.status, memory_result.limit) == ("limit", "memory")
    host.next_execution_works(a)
    host.next_execution_works(b)


def test_new_session_starts_clean(isolated_session: SandboxSession, pool, host) -> None:
    isolated_session.execute(
        f"leak = {SECRET!r}\nopen('left.txt', 'w').write(leak)\nopen('/tmp/left', 'w').write(leak)"
    )
    isolated_session.close()
    fresh = SandboxSession(pool, "after")
    try:
        result = fresh.execute(
            "import os\nprint('leak' in globals(), os.listdir('/workspace'), os.listdir('/tmp'))"
        )
        assert result.stdout == "False [] []\n", result.stdout
    finally:
        fresh.close()

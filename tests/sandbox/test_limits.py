"""Memory, CPU, process and workspace limits, as root and as an ordinary user.

`make test` runs this file twice: as root (cgroups do the work) and, through
scripts/run_unprivileged.py, as an unprivileged user with no cgroups (the host watches the
sandbox, RLIMIT_NPROC counts the sandbox's own user namespace). Each test names a finding it
guards against; they hold in both runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from codemode.bridge.host import ToolAccess
from codemode.sandbox import BwrapBackend, Limits, SandboxPool, SandboxSession, SandboxSettings
from codemode.sandbox.isolation import require_isolation
from codemode.tools import ToolCall

pytestmark = pytest.mark.limits

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[2]


def _settings(**limits: float) -> SandboxSettings:
    base = {"wall_time_s": 20, "memory_bytes": 256 * MiB, "workspace_bytes": 64 * MiB}
    return SandboxSettings(limits=Limits(**{**base, **limits}), pool_size=1)


@pytest.fixture(scope="module")
def memory_pool() -> Iterator[SandboxPool]:
    """256 MiB for the whole sandbox, a 1 GiB workspace (the default): the tmpfs must not
    let the workspace hold more than the memory limit."""
    settings = _settings(workspace_bytes=1 << 30)
    with SandboxPool(BwrapBackend(settings), size=1) as pool:
        yield pool


@pytest.fixture(scope="module")
def cpu_pool() -> Iterator[SandboxPool]:
    with SandboxPool(BwrapBackend(_settings(cpu_time_s=1.5)), size=1) as pool:
        yield pool


def verified(pool: SandboxPool) -> SandboxSession:
    session = SandboxSession(pool, "limits")
    session.execute("pass")
    assert session.sandbox is not None
    require_isolation(session.sandbox)  # raises (the test fails) rather than run unisolated
    return session


@pytest.fixture
def memory_session(memory_pool: SandboxPool) -> Iterator[SandboxSession]:
    session = verified(memory_pool)
    yield session
    session.close()


@pytest.fixture
def cpu_session(cpu_pool: SandboxPool) -> Iterator[SandboxSession]:
    session = verified(cpu_pool)
    yield session
    session.close()


FORKED_MEMORY = """
import os, time
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        block = bytearray(150 << 20)
        block[::4096] = b"\\1" * len(block[::4096])
        time.sleep(30)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
print("RESULT: ESCAPED")
"""


def test_memory_counts_every_forked_child(memory_session: SandboxSession, host) -> None:
    """Finding: as non-root, 4 forked children held 800 MB under a 256 MiB limit."""
    result = memory_session.execute(FORKED_MEMORY)
    assert (result.status, result.limit) == ("limit", "memory"), result.to_dict()
    assert "ESCAPED" not in result.stdout
    assert result.sandbox_reset is True
    host.next_execution_works(memory_session)


WORKSPACE_FILL = """
import os
written = 0
try:
    with open("/workspace/fill", "wb") as handle:
        while written < 600 << 20:
            handle.write(b"\\1" * (1 << 20))
            written += 1 << 20
            os.fsync(handle.fileno())
    print("RESULT: ESCAPED", written >> 20)
except OSError as error:
    print("RESULT: BLOCKED", error.errno, written >> 20)
"""


def test_workspace_cannot_hold_more_than_the_memory_limit(
    memory_session: SandboxSession, host
) -> None:
    """Finding: as non-root, 600 MB of workspace under a 256 MiB memory limit. The workspace
    is a tmpfs (memory): either the disk is full within the limit or the limit ends it."""
    result = memory_session.execute(WORKSPACE_FILL)
    assert "ESCAPED" not in result.stdout, result.to_dict()
    if result.status == "ok":
        _, verdict, errno, mib = result.stdout.split()
        assert (verdict, int(errno)) == ("BLOCKED", 28)
        assert int(mib) <= 256
    else:
        assert (result.status, result.limit) == ("limit", "memory"), result.to_dict()
    host.next_execution_works(memory_session)


SHORT_LIVED_BURNERS = """
import os, time
for _ in range(40):
    pid = os.fork()
    if pid == 0:
        start = time.process_time()
        while time.process_time() - start < 0.1:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
print("RESULT: ESCAPED")
"""


def test_cpu_counts_short_lived_children(cpu_session: SandboxSession, host) -> None:
    """Finding: as non-root, short-lived children used 4 s of CPU under a 2 s limit."""
    result = cpu_session.execute(SHORT_LIVED_BURNERS)
    assert (result.status, result.limit) == ("limit", "cpu_time"), result.to_dict()
    assert "ESCAPED" not in result.stdout
    host.next_execution_works(cpu_session)


def test_cpu_counts_unreaped_children(cpu_session: SandboxSession, host) -> None:
    """Children that end unreaped (zombies) count too: their parent never waits for them."""
    code = SHORT_LIVED_BURNERS.replace("    os.waitpid(pid, 0)\n", "    time.sleep(0.12)\n")
    result = cpu_session.execute(code)
    assert (result.status, result.limit) == ("limit", "cpu_time"), result.to_dict()
    host.next_execution_works(cpu_session)


@pytest.fixture
def idle_processes_of_the_user() -> Iterator[list[subprocess.Popen[bytes]]]:
    """70 idle processes of this user on the host (plain `sleep`, no hostile code)."""
    sleepers: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(70):
            sleepers.append(subprocess.Popen(["sleep", "120"]))
        yield sleepers
    finally:
        for sleeper in sleepers:
            sleeper.kill()
        for sleeper in sleepers:
            sleeper.wait(timeout=10)


class Gate:
    """A host tool that says the code reached it, then holds it until released."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        self.inside.set()
        return self.release.wait(min(timeout_s, 30))


HOLD_40 = """
import subprocess
from servers._runtime import call_tool
kids = [subprocess.Popen(["sleep", "60"]) for _ in range(40)]
call_tool("gate", "hold", {})
print(sum(kid.poll() is None for kid in kids))
"""


def test_the_users_other_processes_do_not_count(idle_processes_of_the_user, host) -> None:
    """Finding: RLIMIT_NPROC counted every task of the user on the host, so 70 idle processes
    of the user stopped every sandbox from starting, and one session could starve the others.
    Now only a sandbox's own tasks count: with 70 idle processes around, one sandbox holds 40
    processes while a second one starts beside it, and a fork bomb there still ends at the
    process limit."""
    assert len(idle_processes_of_the_user) == 70
    gate = Gate()
    with SandboxPool(BwrapBackend(_settings()), size=0) as pool, ThreadPoolExecutor(1) as run:
        first = verified(pool)
        second = None
        try:
            held = run.submit(first.execute, HOLD_40, tools=ToolAccess(gate), timeout_s=60)
            try:
                assert gate.inside.wait(30), "the first sandbox never reached its tool call"
                second = verified(pool)
                bomb = second.execute(
                    "import os\nwhile True:\n    try:\n        os.fork()\n"
                    "    except OSError:\n        pass",
                    timeout_s=10,
                )
                assert (bomb.status, bomb.limit) == ("limit", "processes"), bomb.to_dict()
            finally:
                gate.release.set()
            result = held.result(timeout=60)
            assert (result.status, result.stdout) == ("ok", "40\n"), result.to_dict()
            host.next_execution_works(first)
        finally:
            first.close()
            if second is not None:
                second.close()


ROOTLESS_CONTAINER = """
import json, sys
from codemode.sandbox import BwrapBackend, Limits, SandboxPool, SandboxSession, SandboxSettings
from codemode.sandbox.isolation import require_isolation
settings = SandboxSettings(limits=Limits(wall_time_s=10, memory_bytes=256 << 20), pool_size=0)
with SandboxPool(BwrapBackend(settings), size=0) as pool:
    session = SandboxSession(pool, "rootless")
    session.execute("pass")
    require_isolation(session.sandbox)
    bomb = session.execute(
        "import os\\nwhile True:\\n    try:\\n        os.fork()\\n    except OSError:\\n"
        "        pass", timeout_s=8)
    after = session.execute("print('ok')")
    session.close()
print(json.dumps([__import__("os").geteuid(), bomb.status, bomb.limit, after.stdout]))
"""


def test_uid_0_in_a_user_namespace_runs_sandboxes(tmp_path: Path) -> None:
    """Finding: inside a rootless container (uid 0 in a user namespace) codemode refused to
    run, on the premise that uid 0 means RLIMIT_NPROC cannot apply. `unshare --map-root-user`
    makes such a container: the sandbox starts there and a fork bomb hits the process limit."""
    script = tmp_path / "rootless.py"
    script.write_text(ROOTLESS_CONTAINER)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "HOME": str(tmp_path),
    }
    run = subprocess.run(
        ["unshare", "--user", "--map-root-user", sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == '[0, "limit", "processes", "ok\\n"]'

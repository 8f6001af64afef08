"""A guest runs an empty execution before it says it is ready: a guest forked from the
template maps again, on first touch, the interpreter pages an execution uses (about 170 page
faults, 1.4 ms of CPU), and that belongs to its start, not to a session's first execution.
It leaves nothing a session could see."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.sandbox import BwrapBackend, Limits, SandboxSettings
from codemode.sandbox.runner import Sandbox

# Below the ~170 faults a first execution took before the warm-up, above the ~20 after.
FAULTS_AT_MOST = 80


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    backend = BwrapBackend(SandboxSettings(limits=Limits(wall_time_s=10), pool_size=0))
    started = Sandbox(backend.spawn(), backend.limits)
    started.wait_ready(30)
    # Honest code only, so no isolation probe: its code would be the first execution.
    assert started.process.isolated
    yield started
    started.kill()
    backend.close()


def _minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def test_a_first_execution_finds_the_interpreter_already_mapped(sandbox: Sandbox) -> None:
    assert sandbox.guest_pid is not None
    before = _minor_faults(sandbox.guest_pid)
    result = sandbox.execute("print(1)")
    assert result.status == "ok" and result.stdout == "1\n"
    assert _minor_faults(sandbox.guest_pid) - before <= FAULTS_AT_MOST


def test_the_warm_up_leaves_no_code_output_or_name_behind(sandbox: Sandbox) -> None:
    code = (
        "import sys\n"
        "executed = sys.modules['servers._runtime'].executed\n"
        "print('pass' in executed, len(executed) == 1)\n"
        "print(sorted(n for n in globals() if not n.startswith('__')))"
    )
    result = sandbox.execute(code)
    assert result.status == "ok", result.stderr
    first, names = result.stdout.splitlines()
    assert first == "False True", "the warm-up's code is not kept among the executions'"
    assert names == "['ToolError', 'executed', 'packages', 'sys']"
    assert result.stderr == ""

"""A guest killed from outside while it waited between executions (real bubblewrap)."""

from __future__ import annotations

import os
import signal
import time

from codemode.sandbox import BwrapBackend, SandboxSettings
from codemode.sandbox.runner import Sandbox


def test_code_sent_to_a_guest_that_died_between_executions_is_said_not_to_have_run() -> None:
    """The send fails: none of the code ran. Before, that was reported as a wall-time
    timeout ("Timed out after 60 s") although no time had passed."""
    backend = BwrapBackend(SandboxSettings(pool_size=0))
    sandbox = Sandbox(backend.spawn(), backend.limits)
    try:
        sandbox.wait_ready(30)
        assert sandbox.execute("x = 1").status == "ok"
        pid = sandbox.guest_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while sandbox.process.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        result = sandbox.execute("print('never')")
        assert (result.status, result.limit) == ("limit", "sandbox_gone"), result.to_dict()
        assert result.sandbox_reset and result.stdout == ""
        assert "none of it ran" in result.hint
    finally:
        sandbox.kill()
        backend.close()

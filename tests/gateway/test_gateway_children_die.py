"""A gateway's children never outlive it: after ``codemode serve`` (stdio) is killed with
SIGKILL, which no cleanup can follow, its upstream stdio server, everything that server
started and every sandbox are gone within 5 s.

The upstream here does not stop at the end of its input (a thread that never ends keeps its
process alive, as a busy or badly written server would), so it can only go because the gateway
tethered it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import FAKE_SERVER
from tests.gateway.conftest import alive, descendants, wait_until_gone

GONE_WITHIN_S = 5.0
STARTED_WITHIN_S = 60.0

# The fake MCP server, which keeps running after its input ends, and starts a helper process
# of its own (a server's worker) that would outlive it.
STUBBORN = (
    "import subprocess, sys, threading\n"
    "threading.Thread(target=threading.Event().wait).start()\n"
    "helper = subprocess.Popen([sys.executable, '-c', 'import threading; "
    "threading.Event().wait()', 'upstream-helper'])\n" + FAKE_SERVER
)


def _config(tmp_path: Path) -> Path:
    server = tmp_path / "stubborn_server.py"
    server.write_text(STUBBORN)
    config = tmp_path / "codemode.toml"
    config.write_text(
        "\n".join(
            [
                "[servers.stubborn]",
                f"command = {json.dumps(sys.executable)}",
                f"args = {json.dumps([str(server)])}",
                "",
                "[sandbox]",
                "pool_size = 1",
                "",
                "[gateway]",
                f"state_dir = {json.dumps(str(tmp_path / 'state'))}",
                "",
            ]
        )
    )
    return config


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _wait_for_children(gateway: int, *fragments: str) -> set[int]:
    """Every process below ``gateway`` once one of them matches each of ``fragments``
    (bounded poll on a pipe, no sleep)."""
    import select
    import time

    deadline = time.monotonic() + STARTED_WITHIN_S
    while time.monotonic() < deadline:
        below = descendants(gateway)
        lines = [_cmdline(pid) for pid in below]
        if all(any(fragment in line for line in lines) for fragment in fragments):
            return below
        select.select([], [], [], 0.05)
    raise AssertionError(f"no {fragments} below the gateway within {STARTED_WITHIN_S} s")


def test_a_killed_gateway_leaves_no_upstream_server_or_sandbox(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    gateway = subprocess.Popen(
        [sys.executable, "-m", "codemode", "serve", "--config", str(_config(tmp_path))],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    children: set[int] = set()
    try:
        children = _wait_for_children(gateway.pid, "stubborn_server.py", "upstream-helper", "bwrap")
        gateway.kill()  # SIGKILL: nothing of the gateway runs after this
        gateway.wait(timeout=30)
        left = wait_until_gone(children, GONE_WITHIN_S)
        assert not left, f"outlived the gateway by {GONE_WITHIN_S} s: " + "; ".join(
            f"{pid} {_cmdline(pid)}" for pid in sorted(left)
        )
    finally:
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait(timeout=30)
        for pid in children:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        assert gateway.stdin is not None
        gateway.stdin.close()

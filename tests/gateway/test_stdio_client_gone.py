"""A stdio gateway never outlives its client: stdin's end or its parent's death ends it
within 5 s, even while it builds the search index.

Finding: after its stdio client was killed, ``codemode serve`` stayed alive as an orphan,
building the search index, until killed by hand. Here the index build never ends (a launcher
replaces it with one that blocks, as a build over a huge catalog would), so the gateway can
only exit by not waiting for it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

EXIT_WITHIN_S = 5.0
STARTED = b"index build started"

LAUNCHER = """\
import sys
import threading

from codemode.engine.searching import EngineSearch


def endless_build(self):
    print("index build started", file=sys.stderr, flush=True)
    threading.Event().wait()  # a build that never ends (a huge catalog on a slow machine)


EngineSearch._search_index = endless_build
from codemode.cli.main import main

sys.exit(main(sys.argv[1:]))
"""

# Starts the gateway as its child, prints the gateway's pid, then waits to be killed: the
# gateway's stdin is this process's, so killing it leaves the gateway's stdin open only when
# something else holds the pipe (here the test does: only the parent's death tells).
PARENT = """\
import subprocess
import sys

child = subprocess.Popen(sys.argv[1:], stdin=sys.stdin, stderr=sys.stderr)
print(child.pid, flush=True)
child.wait()
"""


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "codemode.toml"
    config.write_text(f'[sandbox]\npool_size = 0\n\n[gateway]\nstate_dir = "{tmp_path}"\n')
    return config


def _argv(tmp_path: Path) -> list[str]:
    launcher = tmp_path / "launcher.py"
    launcher.write_text(LAUNCHER)
    return [sys.executable, str(launcher), "serve", "--config", str(_config(tmp_path))]


def _wait_for(stream: int, needle: bytes, timeout_s: float) -> None:
    seen = b""
    deadline = time.monotonic() + timeout_s
    while needle not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {needle!r} within {timeout_s} s:\n{seen.decode()}"
        ready, _, _ = select.select([stream], [], [], remaining)
        if ready:
            chunk = os.read(stream, 4096)
            assert chunk, f"the gateway exited early:\n{seen.decode()}"
            seen += chunk


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if state[state.rindex(")") + 2] == "Z":
            return True
        select.select([], [], [], 0.02)
    return False


def test_stdin_closing_ends_it_during_an_index_build(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(
        _argv(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdin is not None and process.stderr is not None
    try:
        _wait_for(process.stderr.fileno(), STARTED, 60)
        process.stdin.close()  # the client went away
        try:
            code = process.wait(timeout=EXIT_WITHIN_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the gateway outlived its closed stdin by {EXIT_WITHIN_S} s"
            ) from None
        assert code == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        process.stderr.close()


def test_its_parents_death_ends_it_although_stdin_stays_open(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    read_end, write_end = os.pipe()  # the gateway's stdin: the test keeps its write end
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, *_argv(tmp_path)],
        stdin=read_end,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(read_end)
    assert parent.stdout is not None and parent.stderr is not None
    gateway = 0
    try:
        gateway = int(parent.stdout.readline())
        _wait_for(parent.stderr.fileno(), STARTED, 60)
        parent.kill()  # the client dies; the gateway's stdin stays open (we hold it)
        parent.wait(timeout=30)
        assert _gone_within(gateway, EXIT_WITHIN_S), (
            f"the gateway outlived its parent by {EXIT_WITHIN_S} s"
        )
    finally:
        os.close(write_end)
        if gateway and not _gone_within(gateway, 0):
            with contextlib.suppress(ProcessLookupError):
                os.kill(gateway, signal.SIGKILL)
        parent.stdout.close()
        parent.stderr.close()

"""`codemode exec` on a terminal: a live status line while the code runs, wiped before output."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from codemode.cli.status_line import StatusLine

SLOW_CODE = "import time\ntime.sleep(3)\nprint('finished')\n"
READ_BOUND_S = 90.0


def _read_all(fd: int, process: subprocess.Popen[bytes]) -> bytes:
    """Everything written to the pty until the process ends (bounded)."""
    chunks = []
    deadline = time.monotonic() + READ_BOUND_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif process.poll() is not None:
            break
    return b"".join(chunks)


def test_a_status_line_shows_progress_on_a_terminal_and_is_wiped(tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    script.write_text(SLOW_CODE)
    leader, follower = pty.openpty()
    env = {**os.environ, "CODEMODE_STATE_DIR": str(tmp_path / "state")}
    process = subprocess.Popen(
        [sys.executable, "-m", "codemode", "exec", "--no-tools", str(script)],
        stdout=subprocess.PIPE,
        stderr=follower,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(follower)
    try:
        shown = _read_all(leader, process)
        stdout, _ = process.communicate(timeout=READ_BOUND_S)
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert process.returncode == 0, shown
    assert stdout == b"finished\n"
    text = shown.decode("utf-8", "replace")
    assert "codemode: running" in text and "tool call(s)" in text and "bytes printed" in text
    assert text.endswith("\r\x1b[2K")  # the last status line was wiped


def test_off_a_terminal_the_status_line_writes_nothing(tmp_path: Path) -> None:
    with (tmp_path / "log").open("w") as stream:
        status = StatusLine(stream)
        assert not status.enabled
        status.clear()
    assert (tmp_path / "log").read_text() == ""

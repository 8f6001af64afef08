"""`codemode exec` as a user runs it: a real process whose output arrives while the code runs."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.cli.exit_codes import ExitCode

SRC = Path(__file__).resolve().parents[2] / "src"
BOUND_S = 60


def start_exec(tmp_path: Path, code: str, *flags: str) -> subprocess.Popen[bytes]:
    source = tmp_path / "code.py"
    source.write_text(code, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(SRC))
    return subprocess.Popen(
        [sys.executable, "-m", "codemode", "exec", "--no-tools", *flags, str(source)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def read_line(stream, bound_s: float = BOUND_S) -> bytes:
    ready, _, _ = select.select([stream], [], [], bound_s)
    assert ready, f"no output within {bound_s} s"
    return stream.readline()


@pytest.fixture
def processes():
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=BOUND_S)


def test_output_arrives_while_the_code_still_runs(tmp_path, processes):
    # The code prints, then waits for far longer than the test reads: the line can only have
    # been read before the execution ended if it was streamed.
    code = "import sys, time\nprint('first')\nprint('warn', file=sys.stderr)\ntime.sleep(600)\n"
    process = start_exec(tmp_path, code, "--timeout", "600")
    processes.append(process)
    assert read_line(process.stdout) == b"first\n"
    assert read_line(process.stderr) == b"warn\n"
    assert process.poll() is None, "the execution had already ended"


def test_ctrl_c_stops_the_code_and_exits_130(tmp_path, processes):
    process = start_exec(tmp_path, "import time\nprint('started')\ntime.sleep(600)\n")
    processes.append(process)
    assert read_line(process.stdout) == b"started\n"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=BOUND_S)
    assert process.returncode == ExitCode.INTERRUPTED == 130
    assert b"interrupted" in err


def test_exit_status_of_the_process_is_the_codes_own(tmp_path, processes):
    process = start_exec(tmp_path, "import sys\nprint('bye')\nsys.exit(3)\n")
    processes.append(process)
    out, err = process.communicate(timeout=BOUND_S)
    assert (process.returncode, out, err) == (3, b"bye\n", b"")


ESCAPES = (
    "import sys\n"
    "sys.stdout.write('\\x1b[31mred\\x1b[0m title\\x1b]0;owned\\x07 clip\\x1b]52;c;aGk=\\x07 "
    "clear\\x1b[2J c1\\x9b2J\\n')\n"
    "sys.stderr.write('err\\x1b]0;owned\\x07\\n')\n"
)


def _read_terminal(master: int, bound_s: float = BOUND_S) -> bytes:
    """Everything written to a pseudo-terminal until its last writer closes it."""
    received = b""
    while True:
        ready, _, _ = select.select([master], [], [], bound_s)
        assert ready, f"no output within {bound_s} s"
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: no writer left
            return received
        if not chunk:
            return received
        received += chunk


def test_escape_sequences_are_shown_not_obeyed_on_a_terminal(tmp_path):
    """The code's output on a terminal: colours pass; a title, clipboard (OSC 52) or screen
    escape is shown as text, never sent to the terminal raw."""
    source = tmp_path / "code.py"
    source.write_text(ESCAPES, encoding="utf-8")
    master, replica = os.openpty()
    env = dict(os.environ, PYTHONPATH=str(SRC))
    process = subprocess.Popen(
        [sys.executable, "-m", "codemode", "exec", "--no-tools", str(source)],
        stdout=replica,
        stderr=replica,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(replica)
    try:
        seen = _read_terminal(master)
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
        process.wait(timeout=BOUND_S)
    assert b"\x1b[31mred\x1b[0m" in seen, seen
    assert b"\x1b]" not in seen and b"\x1b[2J" not in seen and "\x9b".encode() not in seen, seen
    assert b"\\x1b]0;owned\\x07" in seen and b"\\x1b]52;c;aGk=" in seen, seen
    assert b"\\u009b2J" in seen, seen


def test_escape_sequences_pass_byte_for_byte_into_a_pipe(tmp_path):
    source = tmp_path / "code.py"
    source.write_text(ESCAPES, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(SRC))
    done = subprocess.run(
        [sys.executable, "-m", "codemode", "exec", "--no-tools", str(source)],
        capture_output=True,
        check=True,
        env=env,
        timeout=BOUND_S,
    )
    assert b"title\x1b]0;owned\x07 clip\x1b]52;c;aGk=\x07" in done.stdout, done
    assert done.stderr.startswith(b"err\x1b]0;owned\x07\n"), done

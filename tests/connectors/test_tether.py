"""The tether that runs each stdio server (``connectors/tether.py``), run as the gateway runs
it, with this test process as the gateway."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from codemode.connectors.tether import tethered_argv

SIGPIPE_BIT = 1 << (signal.SIGPIPE - 1)
STARTED_WITHIN_S = 30.0


def _tether(command: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        tethered_argv(command, list(args)), capture_output=True, text=True, timeout=60, check=False
    )


def test_the_server_gets_default_signals_its_own_group_and_gives_its_exit_code() -> None:
    # A shell, as Python would ignore SIGPIPE again at its start: grep shows what was inherited.
    script = "grep SigIgn /proc/self/status; python3 -c 'import os; print(os.getpgid(0))'; exit 3"
    run = _tether("/bin/sh", "-c", f"echo $$; {script}")
    assert run.returncode == 3, run.stderr
    shell, ignored, group = run.stdout.replace("SigIgn:", "").split()
    assert not int(ignored, 16) & SIGPIPE_BIT, run.stdout
    assert group == shell, run.stdout


def test_a_server_that_cannot_start_exits_127_and_says_why() -> None:
    run = _tether("/nonexistent/server")
    assert run.returncode == 127
    assert "cannot start '/nonexistent/server'" in run.stderr


def test_asked_to_stop_it_stops_the_servers_whole_group() -> None:
    marker = f"tether-test-{os.getpid()}-{time.monotonic_ns()}"
    script = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{marker}'])\n"
        "print('up', flush=True)\n"
        "time.sleep(600)\n"
    )
    tether = subprocess.Popen(
        tethered_argv(sys.executable, ["-c", script]), stdout=subprocess.PIPE, text=True
    )
    try:
        assert tether.stdout is not None
        assert tether.stdout.readline() == "up\n"
        tether.send_signal(signal.SIGTERM)
        assert tether.wait(timeout=30) == 128 + signal.SIGTERM
        deadline = time.monotonic() + STARTED_WITHIN_S
        while _with_marker(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _with_marker(marker)
    finally:
        tether.kill()
        tether.wait()


def _with_marker(marker: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"{entry.path}/cmdline", "rb") as cmdline:
                    if marker.encode() in cmdline.read():
                        found.append(int(entry.name))
            except OSError:
                continue
    return found

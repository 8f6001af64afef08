"""The tethers that run each stdio server (``connectors/tether.py`` and the shell one in
``connectors/shell_tether.py``), run as the gateway runs them, with this test process as the
gateway. Every test runs against both."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from codemode.connectors.shell_tether import shell_tether_argv, shell_tools, tethered_argv
from codemode.connectors.tether import python_tether_argv

Argv = Callable[[str, list[str]], list[str]]


def _shell(command: str, args: list[str]) -> list[str]:
    tools = shell_tools()
    if tools is None:  # pragma: no cover - this project's machines have them
        pytest.fail("sh, setsid, env --default-signal or setpriv --pdeathsig is missing here")
    return shell_tether_argv(command, args, tools)


TETHERS = pytest.mark.parametrize(
    "tether_argv", [python_tether_argv, _shell], ids=["python", "shell"]
)

# What Python (SIGPIPE) and a shell's background job (SIGINT, SIGQUIT) ignore, and a tether
# must give the server back at their defaults. (Others the gateway itself inherited ignored are
# its environment's choice, as under nohup.)
RESET_BITS = sum(1 << (number - 1) for number in (signal.SIGPIPE, signal.SIGINT, signal.SIGQUIT))
STARTED_WITHIN_S = 30.0


def _tether(tether_argv: Argv, command: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        tether_argv(command, list(args)), capture_output=True, text=True, timeout=60, check=False
    )


def test_the_shell_tether_is_chosen_where_the_system_has_its_tools() -> None:
    argv = tethered_argv("server", ["--flag"])
    assert shell_tools() is not None
    assert argv[-2:] == ["server", "--flag"] and "codemode-tether" in argv


@TETHERS
def test_the_server_gets_default_signals_its_own_group_and_gives_its_exit_code(
    tether_argv: Argv,
) -> None:
    # A shell, as Python would ignore SIGPIPE again at its start: grep shows what was inherited.
    script = "grep SigIgn /proc/self/status; python3 -c 'import os; print(os.getpgid(0))'; exit 3"
    run = _tether(tether_argv, "/bin/sh", "-c", f"echo $$; {script}")
    assert run.returncode == 3, run.stderr
    shell, ignored, group = run.stdout.replace("SigIgn:", "").split()
    assert not int(ignored, 16) & RESET_BITS, f"SIGPIPE, SIGINT or SIGQUIT ignored: {run.stdout}"
    assert group == shell, run.stdout


@TETHERS
def test_a_server_that_cannot_start_exits_127_and_says_why(tether_argv: Argv) -> None:
    run = _tether(tether_argv, "/nonexistent/server")
    assert run.returncode == 127
    assert "cannot start '/nonexistent/server'" in run.stderr


@TETHERS
def test_asked_to_stop_it_stops_the_servers_whole_group(tether_argv: Argv) -> None:
    marker = f"tether-test-{os.getpid()}-{time.monotonic_ns()}"
    script = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{marker}'])\n"
        "print('up', flush=True)\n"
        "time.sleep(600)\n"
    )
    tether = subprocess.Popen(
        tether_argv(sys.executable, ["-c", script]), stdout=subprocess.PIPE, text=True
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


def _servers(marker: str) -> list[int]:
    """The servers (not their tethers, whose command lines hold the marker too) with it. One
    read of each command line: a tether's copy that execs ``sleep`` between two reads would
    pass for a server."""
    return [pid for pid, cmdline in _marked(marker).items() if b"tether" not in cmdline]


def _with_marker(marker: str) -> list[int]:
    return list(_marked(marker))


def _marked(marker: str) -> dict[int, bytes]:
    """The processes whose command line holds ``marker``, with that command line."""
    found: dict[int, bytes] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"{entry.path}/cmdline", "rb") as cmdline:
                    line = cmdline.read()
            except OSError:
                continue
            if marker.encode() in line:
                found[int(entry.name)] = line
    return found


@TETHERS
def test_the_server_reads_the_input_the_gateway_writes(tether_argv: Argv) -> None:
    run = subprocess.run(
        tether_argv("/bin/sh", ["-c", "read line; echo got $line"]),
        input="hello\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.stdout == "got hello\n", run.stderr


GATEWAY = """
import subprocess, sys, time
from codemode.connectors.shell_tether import shell_tether_argv, shell_tools
from codemode.connectors.tether import python_tether_argv
server = [sys.executable, "-c", "import time; time.sleep(600)", sys.argv[2]]
if sys.argv[1] == "python":
    argv = python_tether_argv(server[0], server[1:])
else:
    argv = shell_tether_argv(server[0], server[1:], shell_tools())
subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
print("up", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("flavor", ["python", "shell"])
def test_a_gateway_killed_outright_takes_its_tethered_server_along(flavor: str) -> None:
    marker = f"outright-{os.getpid()}-{time.monotonic_ns()}"
    gateway = subprocess.Popen(
        [sys.executable, "-c", GATEWAY, flavor, marker], stdout=subprocess.PIPE, text=True
    )
    try:
        assert gateway.stdout is not None
        assert gateway.stdout.readline() == "up\n"
        deadline = time.monotonic() + STARTED_WITHIN_S
        while not _servers(marker):
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        gateway.kill()  # SIGKILL: no cleanup of its own can run
        gateway.wait()
        deadline = time.monotonic() + STARTED_WITHIN_S
        # The server itself: a shell tether's copies (its kill fallback's subshell) hold the
        # marker too and may end later on a loaded machine; what must not live on is the server.
        while _servers(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _servers(marker), "the server outlived its gateway"
    finally:
        for pid in _with_marker(marker):
            os.kill(pid, signal.SIGKILL)
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait()

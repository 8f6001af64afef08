"""``send_signal``: the pidfd signal made with the GIL free (through ctypes), doing what
``signal.pidfd_send_signal`` does, errors included."""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from codemode.sandbox import pidsignal
from codemode.sandbox.pidsignal import send_signal

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pidfds are Linux's")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def state_of(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


def until(predicate, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


def test_the_call_is_a_foreign_function_which_lets_go_of_the_gil() -> None:
    sender = pidsignal._sender()
    assert sender is not pidsignal._standard
    cells = [cell.cell_contents for cell in sender.__closure__ or ()]
    assert any(isinstance(cell, ctypes._CFuncPtr) for cell in cells)  # type: ignore[attr-defined]


def test_it_stops_continues_and_kills_a_process(sleeper: subprocess.Popen[bytes]) -> None:
    pidfd = os.pidfd_open(sleeper.pid)
    try:
        send_signal(pidfd, signal.SIGSTOP)
        assert until(lambda: state_of(sleeper.pid) == "T")
        send_signal(pidfd, signal.SIGCONT)
        assert until(lambda: state_of(sleeper.pid) == "S")
        send_signal(pidfd, signal.SIGKILL)
        assert sleeper.wait(5) == -signal.SIGKILL
    finally:
        os.close(pidfd)


def test_an_ended_process_and_a_closed_descriptor_raise_as_the_standard_call_does(
    sleeper: subprocess.Popen[bytes],
) -> None:
    pidfd = os.pidfd_open(sleeper.pid)
    try:
        sleeper.kill()
        sleeper.wait(5)
        with pytest.raises(ProcessLookupError):
            send_signal(pidfd, signal.SIGCONT)
        with pytest.raises(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGCONT)
    finally:
        os.close(pidfd)
    with pytest.raises(OSError) as raised:
        send_signal(pidfd, signal.SIGCONT)
    assert raised.value.errno == errno.EBADF

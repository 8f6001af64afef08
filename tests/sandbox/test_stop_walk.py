"""The stop walk looks for children only once the processes it signalled have stopped: a fork
under way when SIGSTOP arrives still completes, and its child appears only then."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from codemode.sandbox.meter import ProcMeter
from codemode.sandbox.proctree import wait_stopped
from codemode.settings.sandbox import Limits

THREADED = (
    "import threading, time\n"
    "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
    "print('ready', flush=True)\n"
    "time.sleep(30)\n"
)


def start_threaded() -> subprocess.Popen[bytes]:
    child = subprocess.Popen([sys.executable, "-c", THREADED], stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    return child


def test_every_thread_of_a_signalled_process_is_seen_stopped() -> None:
    child = start_threaded()
    try:
        assert len(os.listdir(f"/proc/{child.pid}/task")) == 2
        child.send_signal(signal.SIGSTOP)
        assert wait_stopped([child.pid], timeout_s=30)
        for tid in os.listdir(f"/proc/{child.pid}/task"):
            stat = open(f"/proc/{child.pid}/task/{tid}/stat").read()
            assert stat.rsplit(")", 1)[1].split()[0] == "T"
    finally:
        child.kill()
        child.wait()


def test_a_process_that_does_not_stop_is_reported_at_the_timeout() -> None:
    child = start_threaded()
    try:
        assert not wait_stopped([child.pid], timeout_s=0.05)  # never signalled
    finally:
        child.kill()
        child.wait()


def test_an_ended_process_counts_as_stopped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert wait_stopped([child.pid], timeout_s=30)


BUSY = "print('ready', flush=True)\nwhile True:\n    pass\n"


def test_a_guest_stopped_alone_is_stopped_when_the_stop_returns() -> None:
    """The meter's stop of a guest alone (one signal through its pidfd) returns once the
    guest has stopped: a SIGSTOP is only pending until its target next leaves the kernel, and
    a fork it is in the middle of completes first, its child seen only then. Reading the
    children before that could call a sandbox stopped with a child just born still running.
    A busy process (its own helper, ordinary code) is stopped and resumed again and again."""
    child = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    meter = ProcMeter(Limits(), mounts=())
    try:
        meter.bind(child.pid)
        for _ in range(30):
            assert meter.stop()
            state = open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[0]
            assert state == "T", state
            meter.resume()
    finally:
        meter.release()
        child.kill()
        child.wait()

"""The stop walk looks for children only once the processes it signalled have stopped: a fork
under way when SIGSTOP arrives still completes, and its child appears only then."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from codemode.sandbox.proctree import wait_stopped

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

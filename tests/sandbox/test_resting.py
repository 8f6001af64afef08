"""When may the host leave a guest asleep between executions instead of stopping it
(sandbox/resting.py)? Only when the guest provably cannot run until its next frame.

The first tests give ``rests_alone`` /proc texts written here, one condition broken at a
time; the others read real processes (this test's own helpers, ordinary code, no sandbox) that
wait the way the guest waits, or almost."""

from __future__ import annotations

import functools
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from codemode.sandbox import settle
from codemode.sandbox.proctree import read_small
from codemode.sandbox.resting import rests_alone
from codemode.sandbox.settle import read_memory, waits_on

BRIDGE_FD = 7
POLLFD_AT = 0x7FFC0000
SIGALRM_BIT = 1 << (14 - 1)
SIGINT_BIT = 1 << (2 - 1)
EVERY_SIGNAL = "fffffffe7ffbfeff"  # what the guest's mask shows while it waits


def status(threads: int = 1, caught: int = SIGINT_BIT, blocked: str = EVERY_SIGNAL) -> str:
    return (
        "Name:\tpython3\nState:\tS (sleeping)\nTgid:\t1\n"
        f"Threads:\t{threads}\nSigQ:\t0/256\nSigPnd:\t0000000000000000\n"
        f"ShdPnd:\t0000000000000000\nSigBlk:\t{blocked}\nSigIgn:\t0000000001001000\n"
        f"SigCgt:\t{caught:016x}\nvoluntary_ctxt_switches:\t12\n"
    )


def poll_syscall(nfds: int = 1, timeout: int = 0xFFFFFFFF) -> str:
    return f"7 0x{POLLFD_AT:x} 0x{nfds:x} 0x{timeout:x} 0x0 0x0 0x0 0x7ffc1000 0x7f001234\n"


class FakeProc:
    """/proc of one guest, as texts; ``counters`` gives schedstat's readings in turn."""

    def __init__(self, **texts: str) -> None:
        pid = 1
        self.files = {
            f"/proc/{pid}/schedstat": "1000 200 30\n",
            f"/proc/{pid}/status": status(),
            f"/proc/{pid}/syscall": poll_syscall(),
            f"/proc/{pid}/task/{pid}/children": "",
        }
        for name, text in texts.items():
            self.files[f"/proc/{pid}/{name}"] = text
        self.counters = ["1000 200 30\n", "1000 200 30\n"]
        self.polled = struct.pack("=ihh", BRIDGE_FD, 0x1, 0)
        self.fail: str | None = None

    def read(self, path: str) -> str:
        if self.fail is not None and path.endswith(self.fail):
            raise OSError(2, "gone")
        if path.endswith("schedstat"):
            return self.counters.pop(0)
        if path.endswith("children"):
            return self.files["/proc/1/task/1/children"]
        return self.files[path]

    def memory(self, address: int, size: int) -> bytes:
        assert address == POLLFD_AT
        return self.polled[:size]

    def rests(self) -> bool:
        return rests_alone(self.read, self.memory, 1, BRIDGE_FD)


@pytest.fixture
def x86_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The /proc texts below use x86_64's system call numbers: the checks read them as such
    on every machine (the real processes further down use the machine's own)."""
    monkeypatch.setattr(settle, "_READ_SYSCALLS", frozenset({"0", "45"}))
    monkeypatch.setattr(settle, "_POLL_SYSCALLS", {"7": "poll", "271": "ppoll"})


@pytest.mark.usefixtures("x86_numbers")
def test_a_guest_alone_polling_its_bridge_with_signals_blocked_rests() -> None:
    assert FakeProc().rests()
    # Its read of the bridge is as good as its poll.
    assert FakeProc(syscall="0 0x7 0x5612 0x10000 0x0 0x0 0x0 0x7ffc 0x7f00\n").rests()
    # A caught signal it blocks cannot run anything either.
    assert FakeProc(status=status(caught=SIGINT_BIT | SIGALRM_BIT)).rests()


@pytest.mark.usefixtures("x86_numbers")
@pytest.mark.parametrize(
    "broken",
    [
        "it ran between the readings",
        "a second thread",
        "a child",
        "a caught signal not blocked",
        "a real-time signal caught, not blocked",
        "running",
        "asleep elsewhere",
        "a poll with a timeout",
        "a ppoll with a timeout",
        "two descriptors polled",
        "another descriptor polled",
        "polled for output",
        "read of another descriptor",
        "a reading fails",
        "its memory cannot be read",
        "a status without its threads",
    ],
)
def test_any_doubt_and_the_guest_is_stopped_instead(broken: str) -> None:
    proc = FakeProc()
    if broken == "it ran between the readings":
        proc.counters = ["1000 200 30\n", "1100 200 31\n"]
    elif broken == "a second thread":
        proc.files["/proc/1/status"] = status(threads=2)
    elif broken == "a child":
        proc.files["/proc/1/task/1/children"] = "2 "
    elif broken == "a caught signal not blocked":
        proc.files["/proc/1/status"] = status(caught=SIGINT_BIT | SIGALRM_BIT, blocked="0")
    elif broken == "a real-time signal caught, not blocked":
        # /proc/<pid>/stat shows only the first 31 signals: the status shows them all.
        proc.files["/proc/1/status"] = status(caught=1 << 40, blocked="000000007ffbfeff")
    elif broken == "running":
        proc.files["/proc/1/syscall"] = "running\n"
    elif broken == "asleep elsewhere":
        proc.files["/proc/1/syscall"] = "35 0x7ffc 0x0 0x0 0x0 0x0 0x0 0x7ffc 0x7f00\n"
    elif broken == "a poll with a timeout":
        proc.files["/proc/1/syscall"] = poll_syscall(timeout=1000)
    elif broken == "a ppoll with a timeout":
        proc.files["/proc/1/syscall"] = f"271 0x{POLLFD_AT:x} 0x1 0x7ffc2000 0x0 0x8 0x0 0x0 0x0\n"
    elif broken == "two descriptors polled":
        proc.files["/proc/1/syscall"] = poll_syscall(nfds=2)
    elif broken == "another descriptor polled":
        proc.polled = struct.pack("=ihh", BRIDGE_FD + 1, 0x1, 0)
    elif broken == "polled for output":
        proc.polled = struct.pack("=ihh", BRIDGE_FD, 0x1 | 0x4, 0)
    elif broken == "read of another descriptor":
        proc.files["/proc/1/syscall"] = "0 0x8 0x5612 0x10000 0x0 0x0 0x0 0x7ffc 0x7f00\n"
    elif broken == "a reading fails":
        proc.fail = "status"
    elif broken == "its memory cannot be read":

        def unreadable(address: int, size: int) -> bytes:
            raise OSError(13, "denied")

        proc.memory = unreadable  # type: ignore[method-assign]
    elif broken == "a status without its threads":
        proc.files["/proc/1/status"] = status().replace("Threads:\t1\n", "")
    assert not proc.rests(), broken


# --- real processes ---------------------------------------------------------------------------

WAITER = """
import os, select, signal, sys, threading, time
fd = int(sys.argv[1])
how = sys.argv[2]
if how == "handler":
    signal.signal(signal.SIGALRM, lambda *_: None)
if how == "thread":
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
if how != "handler":
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
poller = select.poll()
poller.register(fd, select.POLLIN)
print("ready", flush=True)
poller.poll(60_000 if how == "timeout" else None)
"""


def wait_until(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if check():
            return True
        time.sleep(0.005)
    return False


def started(guest: socket.socket, how: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(guest.fileno()), how],
        stdout=subprocess.PIPE,
        text=True,
        pass_fds=(guest.fileno(),),
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    return process


def asleep_in_poll(pid: int) -> bool:
    try:
        return read_small(f"/proc/{pid}/syscall").split()[0] in ("7", "271", "73")
    except (OSError, IndexError):
        return False


@pytest.mark.parametrize(
    ("how", "rests"),
    [
        ("alone", True),
        ("handler", False),  # a timer of its own would run its handler
        ("thread", False),  # the other thread could run
        ("timeout", False),  # the poll itself ends, and the code runs on
    ],
)
def test_a_real_process_rests_only_when_nothing_can_wake_it(
    bridge: tuple[socket.socket, socket.socket], how: str, rests: bool
) -> None:
    _, guest = bridge
    process = started(guest, how)
    try:
        assert wait_until(lambda: asleep_in_poll(process.pid)), "the helper never polled"
        memory = functools.partial(read_memory, process.pid)
        syscall = read_small(f"/proc/{process.pid}/syscall")
        assert waits_on(syscall, guest.fileno(), memory) is (how != "timeout")
        assert not waits_on(syscall, guest.fileno() + 1, memory)  # another descriptor
        assert rests_alone(read_small, memory, process.pid, guest.fileno()) is rests
    finally:
        process.kill()
        process.wait()

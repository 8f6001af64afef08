"""How the host decides that a guest is between executions (sandbox/settle.py), against real
processes: a guest that only waits for a CPU is not mistaken for code that kept running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from codemode.sandbox.settle import SETTLE_S, waits_for_frames

Pair = tuple[socket.socket, socket.socket]

READER = """
import os, sys
fd = int(sys.argv[1])
print("ready", flush=True)
os.read(fd, 1)
"""

SPINNER = """
print("ready", flush=True)
while True:
    pass
"""

SLEEPER = """
import time
print("ready", flush=True)
time.sleep(60)
"""


def start(code: str, *args: str, pass_fds: tuple[int, ...] = ()) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True, pass_fds=pass_fds
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    return process


def test_a_guest_in_its_read_is_between_executions(bridge: Pair) -> None:
    _, guest = bridge
    process = start(READER, str(guest.fileno()), pass_fds=(guest.fileno(),))
    try:
        assert waits_for_frames(process.pid, guest.fileno())
        assert not waits_for_frames(process.pid, guest.fileno() + 1)  # another descriptor
    finally:
        process.kill()
        process.wait()


POLLER = """
import select, sys
fd = int(sys.argv[1])
poller = select.poll()
poller.register(fd, select.POLLIN)
print("ready", flush=True)
poller.poll()
"""


def test_a_guest_polling_its_bridge_is_between_executions(bridge: Pair) -> None:
    """The guest waits in a poll of the bridge alone (then reads): the host reads which
    descriptor it polls from its memory."""
    _, guest = bridge
    other, other_guest = socket.socketpair()
    process = start(POLLER, str(guest.fileno()), pass_fds=(guest.fileno(),))
    elsewhere = start(POLLER, str(other_guest.fileno()), pass_fds=(other_guest.fileno(),))
    try:
        assert waits_for_frames(process.pid, guest.fileno())
        # Polling another socket: not the bridge.
        assert not waits_for_frames(elsewhere.pid, guest.fileno())
    finally:
        for started in (process, elsewhere):
            started.kill()
            started.wait()
        other.close()
        other_guest.close()


def test_a_guest_kept_off_the_cpu_past_the_wall_bound_is_still_waited_for(bridge: Pair) -> None:
    """Finding: on a loaded machine an honest guest waited more than 50 ms for a CPU before
    it reached its read, and the host killed its sandbox as code that kept running. A stopped
    process stands for that guest: it uses no CPU until it is let go, then reads."""
    _, guest = bridge
    # It stops itself on its way to the read. Stopped by the host after a sleep of its own,
    # it reached the read first whenever the host took longer than that sleep to send the
    # SIGSTOP (a loaded machine), and a task stopped in its read is waiting for frames.
    process = start(
        "import os, signal, sys\nprint('ready', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGSTOP)\nos.read(int(sys.argv[1]), 1)",
        str(guest.fileno()),
        pass_fds=(guest.fileno(),),
    )
    deadline = time.monotonic() + 10
    while _state(process.pid) != "T":
        assert time.monotonic() < deadline, "the guest did not stop itself"
        time.sleep(0.001)
    release = threading.Timer(SETTLE_S * 4, os.kill, (process.pid, signal.SIGCONT))
    # Read before the timer starts, so the SIGCONT comes at least SETTLE_S * 4 after it.
    started = time.monotonic()
    release.start()
    try:
        assert waits_for_frames(process.pid, guest.fileno())
        assert time.monotonic() - started >= SETTLE_S * 4  # it really waited past the bound
    finally:
        release.cancel()
        process.kill()
        process.wait()


def _state(pid: int) -> str:
    """The process's state letter in /proc ("T": stopped)."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.parametrize("code", [SPINNER, SLEEPER], ids=["keeps-the-cpu", "asleep-elsewhere"])
def test_code_that_is_not_in_the_read_is_judged_running(bridge: Pair, code: str) -> None:
    _, guest = bridge
    process = start(code)
    try:
        assert not waits_for_frames(process.pid, guest.fileno())
    finally:
        process.kill()
        process.wait()


def test_the_host_looks_again_at_once_before_it_yields(monkeypatch: pytest.MonkeyPatch) -> None:
    """A yield at once handed the host's CPU to any runnable process for a whole time slice
    while the guest, on another CPU, was microseconds from its read: within ``SPIN_S`` the
    host looks again without yielding; then it yields three times; then it naps."""
    from codemode.sandbox import settle

    calls: list[str] = []
    monkeypatch.setattr(os, "sched_yield", lambda: calls.append("yield"))
    monkeypatch.setattr(time, "sleep", lambda seconds: calls.append("nap"))
    pacer = settle._Pacer()
    pacer.begun = time.monotonic() + 3600  # still within the spin
    for _ in range(10):
        pacer.pause()
    assert calls == []
    pacer.begun -= 7200  # the spin is over
    for _ in range(5):
        pacer.pause()
    assert calls == ["yield", "yield", "yield", "nap", "nap"]


def test_a_guest_waiting_for_the_hosts_own_cpu_is_yielded_to_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finding: where the scheduler had put the guest on the host thread's CPU, the host's
    spin kept the guest (runnable, on its way to the read) off that CPU for the whole spin:
    a warm execution parked in 56 us instead of 17. Such a guest is yielded to at once."""
    from codemode.sandbox import settle

    calls: list[str] = []
    monkeypatch.setattr(os, "sched_yield", lambda: calls.append("yield"))
    asked: list[bool] = []
    pacer = settle._Pacer(lambda: asked.append(True) or True)
    pacer.begun = time.monotonic() + 3600  # within the spin, were there one
    pacer.pause()
    pacer.pause()
    assert calls == ["yield", "yield"]
    assert asked == [True]  # asked once per wait: each look costs a /proc read


def _pinned_reader(cpu: int, fd: int) -> subprocess.Popen[str]:
    """A process that moves itself to ``cpu``, then blocks in a read (off every CPU, its last
    one recorded)."""
    code = f"import os, sys\nos.sched_setaffinity(0, {{{cpu}}})\n{READER}"
    return start(code, str(fd), pass_fds=(fd,))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to tell apart")
def test_the_host_tells_a_guest_on_its_own_cpu_from_one_elsewhere(bridge: Pair) -> None:
    from codemode.sandbox.proctree import read_small
    from codemode.sandbox.settle import _last_ran_here

    _, guest = bridge
    here, there, *_ = sorted(os.sched_getaffinity(0))
    allowed = os.sched_getaffinity(0)
    near = _pinned_reader(here, guest.fileno())
    far = _pinned_reader(there, guest.fileno())
    try:
        os.sched_setaffinity(0, {here})  # this thread only
        assert _last_ran_here(near.pid, read_small)
        assert not _last_ran_here(far.pid, read_small)
        assert not _last_ran_here(2**22 + 7, read_small)  # no such process: spin as before
    finally:
        os.sched_setaffinity(0, allowed)
        for process in (near, far):
            process.kill()
            process.wait()


def test_the_wait_asks_once_whether_the_guest_waits_for_this_cpu(
    bridge: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait for the guest's read hands its pacer the placement question, about this
    guest, asked at most once however long the wait."""
    from codemode.sandbox import settle

    asked: list[int] = []

    def last_ran_here(pid: int, read: object) -> bool:
        asked.append(pid)
        return False

    monkeypatch.setattr(settle, "_last_ran_here", last_ran_here)
    _, guest = bridge
    process = start(SLEEPER)
    try:
        assert not waits_for_frames(process.pid, guest.fileno())
        assert asked == [process.pid]
    finally:
        process.kill()
        process.wait()

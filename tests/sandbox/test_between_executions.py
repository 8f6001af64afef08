"""Nothing of the code runs between executions, and the guest's report decides nothing.

Once a result is returned, every task of the sandbox is stopped until the next execution; the
host, not the guest, decides the result's size, caps and file list. The CPU time of the
sandbox's processes is read here straight from /proc, independently of the sandbox's meter.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from codemode.bridge.host import ToolAccess
from codemode.sandbox import SandboxSession
from codemode.tools import ToolCall

pytestmark = pytest.mark.limits

TICK = os.sysconf("SC_CLK_TCK")

RAW = """
import sys, time
rt = sys.modules["servers._runtime"]
from _codemode_guest import wire
def forge(**fields):
    rt.bridge.sock.sendall(wire.encode_frame({"op": "done", "exec": rt.bridge.execution, **fields}))
"""


def sandbox_cpu_seconds(session: SandboxSession) -> float:
    """utime + stime (+ reaped children's) of every process under the sandbox's bwrap."""
    assert session.sandbox is not None
    total = 0
    pending = [session.sandbox.process.pid]
    while pending:
        pid = pending.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        total += sum(int(value) for value in fields[11:15])
        for tid in tasks:
            try:
                pending += [
                    int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
                ]
            except OSError:
                continue
    return total / TICK


FORGED_THEN_BUSY = (
    RAW
    + """
forge(exit_code=0, error=None)
time.sleep(0.3)  # off the CPU when the host looks
while True:
    pass
"""
)

FORGED_THEN_WAITING = (
    RAW
    + """
import signal
def burn(*_):
    start = time.process_time()
    while time.process_time() - start < 0.04:
        pass
signal.signal(signal.SIGALRM, burn)
signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
forge(exit_code=0, error=None)
rt.bridge.sock.recv(1)  # waits where an honest guest waits; the timer burns the CPU
while True:
    pass
"""
)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_code_that_forges_done_does_not_run_after_the_result(
    isolated_session: SandboxSession, host
) -> None:
    """Finding: code that wrote its own "done" got "ok" back at once and then ran with no
    wall-time or CPU limit until the session's next execution (15 minutes), as root too.
    Now the host sees the guest is not waiting for the next frame and ends the sandbox."""
    assert isolated_session.sandbox is not None
    bwrap = isolated_session.sandbox.process.pid
    result = isolated_session.execute(FORGED_THEN_BUSY, timeout_s=10)
    assert result.left_running, result.to_dict()
    assert result.sandbox_reset is True
    assert not alive(bwrap), "the sandbox still runs after its result was returned"
    host.next_execution_works(isolated_session)


def test_code_that_waits_like_the_guest_stays_stopped(
    isolated_session: SandboxSession, host
) -> None:
    """Code that forges "done" and then waits where the guest waits cannot be told from an
    honest guest, but a timer of its own would run its code there; stopped with the rest of
    the sandbox, it does not: the sandbox's CPU time does not grow."""
    result = isolated_session.execute(FORGED_THEN_WAITING, timeout_s=10)
    assert (result.status, result.sandbox_reset) == ("ok", False), result.to_dict()
    before = sandbox_cpu_seconds(isolated_session)
    host.pause(1.0)  # the code would burn up to a second of CPU here if it ran
    after = sandbox_cpu_seconds(isolated_session)
    assert after - before < 0.05, f"the sandbox used {after - before:.2f} s of CPU while idle"
    # The next execution resumes it, within that execution's limits.
    later = isolated_session.execute("print('ok')", timeout_s=2)
    assert (later.status, later.limit) == ("timeout", "wall_time"), later.to_dict()
    host.next_execution_works(isolated_session)


TIMER = """
import signal, time
ticks = []
signal.signal(signal.SIGALRM, lambda *_: ticks.append(time.monotonic()))
signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
"""


def test_signal_handlers_do_not_run_between_executions(
    isolated_session: SandboxSession, host
) -> None:
    """A timer signal would interrupt the guest's wait for the next frame and run a handler
    of the code's choosing. Either the sandbox is stopped and runs none, or (when the host
    catches the handler running as it looks) the sandbox is ended: never does a tick land
    between two executions."""
    assert isolated_session.sandbox is not None
    bwrap = isolated_session.sandbox.process.pid
    first = isolated_session.execute(TIMER, timeout_s=5)
    assert first.status == "ok", first.to_dict()
    ended = time.monotonic()
    host.pause(0.5)
    resumed = time.monotonic()
    if first.sandbox_reset:
        assert first.left_running, first.to_dict()
        assert not alive(bwrap)
    else:
        later = isolated_session.execute(
            "signal.setitimer(signal.ITIMER_REAL, 0)\n"
            f"print(sum({ended + 0.03} < t < {resumed} for t in ticks), len(ticks) > 0)",
            timeout_s=5,
        )
        assert later.stdout == "0 True\n", later.to_dict()
    host.next_execution_works(isolated_session)


FORGED_HUGE = (
    RAW
    + """
huge = "x" * (4 << 20)  # 30 MB in all, under the bridge's 64 MB frame cap
forge(
    exit_code=0,
    error={"type": huge, "message": huge, "traceback": huge, "tool": huge, "line": 1 << 40},
    files={"created": [huge[:300_000]] * 20, "modified": ["/etc/shadow"], "deleted": huge},
    workspace={"used": huge, "total": -1},
    extra={"anything": huge},
)
"""
)


def test_a_forged_done_cannot_grow_the_result(isolated_session: SandboxSession, host) -> None:
    """Finding: a forged "done" set `workspace` and `files` freely and returned a 52 MB
    response past the 1,000-character output cap."""
    result = isolated_session.execute(FORGED_HUGE, timeout_s=10)
    data = result.to_dict()
    size = len(json.dumps(data))
    assert size < 20_000, f"the result is {size:,} characters"
    assert result.files == {"created": [], "modified": [], "deleted": []}
    assert isinstance(data["workspace_bytes"], int) and data["workspace_bytes"] < 64 << 20
    assert result.error is not None and result.error["line"] is None
    assert len(result.error["message"]) <= 2000 and len(result.error["type"]) <= 100
    assert "anything" not in data
    host.next_execution_works(isolated_session)


def test_the_host_lists_the_workspace(isolated_session: SandboxSession, host) -> None:
    """The file list comes from the host's own look at the workspace, links included (never
    followed), not from the guest."""
    code = """
import os
os.makedirs("a/b", exist_ok=True)
open("a/b/new.txt", "w").write("x")
os.symlink("/etc/shadow", "link")
open("kept.txt", "w").write("1")
"""
    first = isolated_session.execute(code, timeout_s=5)
    assert first.files == {
        "created": ["a/b/new.txt", "kept.txt", "link"],
        "modified": [],
        "deleted": [],
    }
    second = isolated_session.execute(
        "import os\nopen('kept.txt', 'a').write('2')\nos.unlink('link')", timeout_s=5
    )
    assert second.files == {"created": [], "modified": ["kept.txt"], "deleted": ["link"]}
    host.next_execution_works(isolated_session)


SELF_RESUMING = """
import ctypes, os, signal, threading, time
ticks = []
def count():
    while True:
        ticks.append(time.monotonic())
        time.sleep(0.005)
threading.Thread(target=count, daemon=True).start()
libc = ctypes.CDLL(None, use_errno=True)
class SigEvent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("rest", ctypes.c_byte * 48)]
class TimerSpec(ctypes.Structure):
    _fields_ = [("interval_s", ctypes.c_long), ("interval_ns", ctypes.c_long),
                ("value_s", ctypes.c_long), ("value_ns", ctypes.c_long)]
timer = ctypes.c_void_p()
# SIGEV_SIGNAL (0) of SIGCONT every 10 ms on CLOCK_MONOTONIC (1).
created = libc.timer_create(1, ctypes.byref(SigEvent(None, signal.SIGCONT, 0)), ctypes.byref(timer))
print("timer_create", created, ctypes.get_errno())
if created == 0:
    libc.timer_settime(timer, 0, ctypes.byref(TimerSpec(0, 10_000_000, 0, 10_000_000)), None)
try:
    os.kill(os.getpid(), signal.SIGCONT)
    print("kill allowed")
except PermissionError:
    print("kill refused")
"""


def test_code_cannot_resume_itself_between_executions(
    isolated_session: SandboxSession, host
) -> None:
    """Finding: a POSIX timer delivering SIGCONT undid the host's SIGSTOP, and a background
    thread then ran about 870 ticks in one idle second. Nothing inside may send SIGCONT by any
    route (kill and its siblings, timers, F_SETSIG, exit and parent-death signals): only the
    host resumes the sandbox."""
    first = isolated_session.execute(SELF_RESUMING, timeout_s=5)
    assert first.status == "ok", first.to_dict()
    assert first.stdout == "timer_create -1 1\nkill refused\n", first.to_dict()
    assert not first.sandbox_reset, first.to_dict()
    ended = time.monotonic()
    host.pause(0.5)
    resumed = time.monotonic()
    later = isolated_session.execute(
        f"print(sum({ended + 0.03} < t < {resumed} for t in ticks), len(ticks) > 0)", timeout_s=5
    )
    assert later.stdout == "0 True\n", later.to_dict()
    host.next_execution_works(isolated_session)


def test_an_emptied_workspace_lists_what_was_deleted(
    isolated_session: SandboxSession, host
) -> None:
    """An empty workspace is known from its tmpfs's inode count without a listing; the files
    of the execution before still show as deleted, and a file written again as created."""
    first = isolated_session.execute("open('a.txt', 'w').write('1')", timeout_s=5)
    assert first.files == {"created": ["a.txt"], "modified": [], "deleted": []}
    emptied = isolated_session.execute("import os\nos.unlink('a.txt')", timeout_s=5)
    assert emptied.files == {"created": [], "modified": [], "deleted": ["a.txt"]}
    quiet = isolated_session.execute("print(1)", timeout_s=5)
    assert quiet.files == {"created": [], "modified": [], "deleted": []}
    again = isolated_session.execute("open('a.txt', 'w').write('2')", timeout_s=5)
    assert again.files == {"created": ["a.txt"], "modified": [], "deleted": []}
    host.next_execution_works(isolated_session)


def guest_status(session: SandboxSession) -> dict[str, str]:
    """The guest's /proc/<pid>/status, read here, independently of the sandbox's meter."""
    assert session.sandbox is not None and session.sandbox.guest_pid is not None
    text = Path(f"/proc/{session.sandbox.guest_pid}/status").read_text()
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def stopped(session: SandboxSession) -> bool:
    """Is the guest stopped? A SIGSTOP sent while it ran takes effect a moment later."""
    deadline = time.monotonic() + 2.0
    while not guest_status(session)["State"].startswith("T"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def test_an_honest_guest_rests_between_executions_and_wakes_once_for_each(
    isolated_session: SandboxSession,
) -> None:
    """An honest guest, alone in its sandbox, waits for its next frame with every signal
    blocked: it cannot run, so it is left asleep rather than stopped, and each warm execution
    wakes it once (no stop and resume signals, and no wake-up when the host reads its answer).
    It used to be woken three or four times an execution."""
    assert isolated_session.execute("pass").status == "ok"
    before = guest_status(isolated_session)
    for _ in range(40):
        result = isolated_session.execute("x = 1")
        assert result.status == "ok", result.to_dict()
    after = guest_status(isolated_session)
    assert after["State"].startswith("S"), after["State"]  # asleep, not stopped ("T")
    caught, blocked = int(after["SigCgt"], 16), int(after["SigBlk"], 16)
    assert caught & ~blocked == 0, (after["SigCgt"], after["SigBlk"])
    woken = int(after["voluntary_ctxt_switches"]) - int(before["voluntary_ctxt_switches"])
    assert woken <= 44, f"{woken} wake-ups for 40 executions"


def test_tool_calls_wake_the_guest_once_each(isolated_session: SandboxSession) -> None:
    """The guest waits for a reply in a poll, which the host's reading of the call does not
    end (a read on the socket was woken by it, for nothing, on most calls)."""
    isolated_session.execute("from servers._runtime import call_tool")
    before = guest_status(isolated_session)
    result = isolated_session.execute(
        "for i in range(200):\n    call_tool('t', 'echo', {'i': i})",
        tools=ToolAccess(_Echo()),
    )
    assert result.status == "ok", result.to_dict()
    after = guest_status(isolated_session)
    woken = int(after["voluntary_ctxt_switches"]) - int(before["voluntary_ctxt_switches"])
    assert woken <= 200 + 10, f"{woken} wake-ups for 200 calls and one execution"


def test_the_codes_signal_mask_is_its_own_in_every_execution(
    isolated_session: SandboxSession,
) -> None:
    """Every signal is blocked only while the guest waits: the code finds its own mask."""
    first = isolated_session.execute(
        "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})"
    )
    assert first.status == "ok", first.to_dict()
    later = isolated_session.execute(
        "print(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))"
    )
    assert later.stdout == "[10]\n", later.to_dict()


def test_a_guest_with_a_thread_of_the_code_is_stopped(
    isolated_session: SandboxSession, host
) -> None:
    """A second thread could run while the main one waits: the sandbox is stopped instead,
    and the thread runs nothing until the next execution."""
    result = isolated_session.execute(
        "import threading, time\nticks = []\n"
        "def tick():\n    while True:\n        ticks.append(time.monotonic()); time.sleep(0.01)\n"
        "threading.Thread(target=tick, daemon=True).start()\ntime.sleep(0.05)"
    )
    assert result.status == "ok" and not result.sandbox_reset, result.to_dict()
    assert stopped(isolated_session)
    ended = time.monotonic()
    host.pause(0.3)
    resumed = time.monotonic()
    later = isolated_session.execute(f"print(sum({ended + 0.03} < t < {resumed} for t in ticks))")
    assert later.stdout == "0\n", later.to_dict()


class _Echo:
    def invoke(self, call: ToolCall, *, timeout_s: float) -> object:
        return call.arguments


UNBLOCKED_WAIT = """
import signal, sys, time
import _codemode_guest.quiet as guest_quiet
ticks = []
signal.signal(signal.SIGALRM, lambda *_: ticks.append(time.monotonic()))
signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
guest_quiet._EVERY_SIGNAL = set()  # the guest's wait would leave the timer's signal unblocked
"""


def test_a_guest_made_to_wait_with_its_signals_unblocked_is_stopped(
    isolated_session: SandboxSession, host
) -> None:
    """Code that keeps the guest's wait from blocking signals (its timer's handler would run
    there) only makes the host stop the sandbox, as before: no tick between executions."""
    first = isolated_session.execute(UNBLOCKED_WAIT, timeout_s=5)
    assert first.status == "ok" and not first.sandbox_reset, first.to_dict()
    assert stopped(isolated_session)
    ended = time.monotonic()
    host.pause(0.3)
    resumed = time.monotonic()
    later = isolated_session.execute(
        "signal.setitimer(signal.ITIMER_REAL, 0)\n"
        f"print(sum({ended + 0.03} < t < {resumed} for t in ticks), len(ticks) > 0)",
        timeout_s=5,
    )
    assert later.stdout == "0 True\n", later.to_dict()


POLLING_ON_ITS_OWN = """
import sys, time
rt = sys.modules["servers._runtime"]
ticks = []

class Impatient:
    def __init__(self, real):
        self.real = real

    def poll(self, *_):
        while not self.real.poll(20):  # a timeout: it runs again every 20 ms
            ticks.append(time.monotonic())
        return []

rt.bridge.poller = Impatient(rt.bridge.poller)
"""


def test_a_guest_whose_wait_ends_by_itself_is_ended(isolated_session: SandboxSession, host) -> None:
    """A wait swapped for a poll with a timeout is not the guest's wait: the code would run
    each time it ends. The host does not leave it resting; it ends the sandbox."""
    assert isolated_session.sandbox is not None
    bwrap = isolated_session.sandbox.process.pid
    result = isolated_session.execute(POLLING_ON_ITS_OWN, timeout_s=10)
    assert result.left_running and result.sandbox_reset, result.to_dict()
    assert not alive(bwrap)
    host.next_execution_works(isolated_session)


def test_a_guest_whose_code_started_threads_still_rests_once_they_ended(
    isolated_session: SandboxSession,
) -> None:
    """Once a thread was started, the C library handles its own two signals (32 and 33),
    which its ``pthread_sigmask`` will not block: the guest's wait blocks them with the
    system call itself, so a session that used a thread pool still rests, not stopped."""
    result = isolated_session.execute(
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(2) as pool:\n    print(sum(pool.map(abs, [1, -2])))"
    )
    assert result.stdout == "3\n", result.to_dict()
    status = guest_status(isolated_session)
    assert int(status["SigCgt"], 16) & (1 << 32), status["SigCgt"]  # the C library's own
    before = int(status["voluntary_ctxt_switches"])
    for _ in range(20):
        assert isolated_session.execute("x = 1").status == "ok"
    after = guest_status(isolated_session)
    assert after["State"].startswith("S"), after["State"]
    assert int(after["SigCgt"], 16) & ~int(after["SigBlk"], 16) == 0
    assert int(after["voluntary_ctxt_switches"]) - before <= 22
    # The code's own mask, as it left it, in every execution.
    mask = isolated_session.execute(
        "import signal\nprint(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))"
    )
    assert mask.stdout == "[]\n", mask.to_dict()

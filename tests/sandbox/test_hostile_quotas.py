"""Kernel objects that outlive one execution and are counted outside the sandbox.

Outside its namespaces every sandbox runs as the host user that started it, and some kernel
quotas are that user's (inotify instances, queued signals, POSIX message queue bytes): a session
holding all of one would break the host process and every other session until it closes. Other
objects hold memory no per-process measure sees (a memfd, SysV shared memory or messages): without
cgroups they would pass the memory limit unseen. Each test holds the object in a live session and
checks from the host (with a harmless call of its own) that nothing of the host's ran out.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import threading
import time

import pytest

from codemode.sandbox import SandboxSession
from codemode.sandbox.watchdog import Watched

pytestmark = pytest.mark.hostile

_libc = ctypes.CDLL(None, use_errno=True)


class _SigVal(ctypes.Union):
    _fields_ = [("sival_int", ctypes.c_int), ("sival_ptr", ctypes.c_void_p)]


class _MqAttr(ctypes.Structure):
    _fields_ = [
        ("mq_flags", ctypes.c_long),
        ("mq_maxmsg", ctypes.c_long),
        ("mq_msgsize", ctypes.c_long),
        ("mq_curmsgs", ctypes.c_long),
        ("reserved", ctypes.c_long * 4),
    ]


def _host_inotify() -> int:
    """0 when this host process can still create an inotify instance, else the errno."""
    fd = _libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        return ctypes.get_errno()
    os.close(fd)
    return 0


def _host_sigqueue() -> int:
    """0 when this host thread can still queue a real-time signal to itself, else the errno.
    Sent to this thread alone (blocked here, taken back at once): another thread of the test
    process would die of it."""
    number = signal.SIGRTMIN
    signal.pthread_sigmask(signal.SIG_BLOCK, [number])
    try:
        _libc.pthread_self.restype = ctypes.c_ulong
        myself = ctypes.c_ulong(_libc.pthread_self())
        failed = _libc.pthread_sigqueue(myself, number, _SigVal(0)) != 0
        code = ctypes.get_errno()
        if not failed:
            assert signal.sigtimedwait([number], 5) is not None
        return code if failed else 0
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [number])


def _host_mq() -> int:
    """0 when this host process can still create a default-sized POSIX message queue."""
    name = f"/codemode-test-{os.getpid()}".encode()
    attr = _MqAttr(0, 10, 8192, 0)
    fd = _libc.mq_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600, ctypes.byref(attr))
    if fd < 0:
        return ctypes.get_errno()
    os.close(fd)
    _libc.mq_unlink(name)
    return 0


# Each payload grabs as much of its quota as the kernel gives (bounded), keeps it in a global
# (held into the next execution), and prints how many it got and why it stopped.
HOARDS = {
    "inotify instances": (
        """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
held, why = [], 0
while len(held) < 1000:
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        why = ctypes.get_errno()
        break
    held.append(fd)
print("RESULT:", len(held), why)
""",
        _host_inotify,
        0,
    ),
    "queued real-time signals": (
        """
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
class SigVal(ctypes.Union):
    _fields_ = [("sival_int", ctypes.c_int), ("sival_ptr", ctypes.c_void_p)]
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
held, why = 0, 0
while held < 200000:
    if libc.sigqueue(os.getpid(), signal.SIGRTMIN, SigVal(0)) != 0:
        why = ctypes.get_errno()
        break
    held += 1
print("RESULT:", held, why)
""",
        _host_sigqueue,
        256,
    ),
    "POSIX message queues": (
        """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
class Attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long),
                ("msgsize", ctypes.c_long), ("cur", ctypes.c_long), ("pad", ctypes.c_long * 4)]
attr = Attr(0, 10, 8192, 0)
held, why = [], 0
while len(held) < 300:
    fd = libc.mq_open(f"/hoard{len(held)}".encode(), os.O_CREAT | os.O_RDWR, 0o600,
                      ctypes.byref(attr))
    if fd < 0:
        why = ctypes.get_errno()
        break
    held.append(fd)
print("RESULT:", len(held), why)
""",
        _host_mq,
        0,
    ),
}


@pytest.mark.parametrize(("code", "host_probe", "most"), HOARDS.values(), ids=HOARDS.keys())
def test_sandbox_cannot_exhaust_a_quota_of_the_host_user(
    isolated_session: SandboxSession, host, code: str, host_probe, most: int
) -> None:
    assert host_probe() == 0, "the host had run out before the test (not the sandbox's doing)"
    result = isolated_session.execute(code, timeout_s=10)
    assert result.status == "ok", result.to_dict()
    held, why = (int(word) for word in result.stdout.split()[1:])
    assert held <= most, f"the sandbox got {held} (at most {most} expected)"
    assert why in (errno.EPERM, errno.EAGAIN), result.stdout
    # The session still holds what it got (its globals live on): the host is not short of it.
    assert host_probe() == 0, f"the host ran out while the sandbox holds {held}"
    host.next_execution_works(isolated_session)


# Memory in kernel objects that no process maps: in no RSS and under no RLIMIT_AS.
UNMEASURED = {
    "memfd written, never mapped": """
import os
fd = os.memfd_create("hoard")
for _ in range(1024):
    os.write(fd, b"x" * (1 << 20))
""",
    "SysV segment filled then detached": """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for _ in range(8):
    segment = libc.shmget(0, 128 << 20, 0o1600)
    if segment < 0:
        raise OSError(ctypes.get_errno(), "shmget")
    address = libc.shmat(segment, None, 0)
    ctypes.memset(address, 1, 128 << 20)
    libc.shmdt(ctypes.c_void_p(address))
""",
    "SysV message queues filled": """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
message = ctypes.create_string_buffer(b"\\1" * 8200)
for _ in range(70000):
    queue = libc.msgget(0, 0o1600)
    if queue < 0:
        raise OSError(ctypes.get_errno(), "msgget")
    libc.msgsnd(queue, message, 8192, 0o4000)
""",
}

UNMEASURED_PROBE = """
try:
{body}
    print("RESULT: ESCAPED")
except OSError as error:
    print("RESULT: BLOCKED", error.errno)
"""


@pytest.mark.parametrize("body", UNMEASURED.values(), ids=UNMEASURED.keys())
def test_memory_the_host_cannot_measure_is_refused(
    isolated_session: SandboxSession, host, body: str
) -> None:
    """A gigabyte (twice the limit) the host would not see without cgroups: refused at once."""
    indented = "\n".join("    " + line for line in body.strip().splitlines())
    result = isolated_session.execute(UNMEASURED_PROBE.format(body=indented), timeout_s=10)
    assert result.stdout == f"RESULT: BLOCKED {errno.EPERM}\n", result.to_dict()
    host.next_execution_works(isolated_session)


def test_ctypes_callbacks_work_without_memfd(isolated_session: SandboxSession, host) -> None:
    """libffi tries memfd_create for its closures first; refused, it must fall back."""
    code = """
import ctypes
libc = ctypes.CDLL(None)
Compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
values = (ctypes.c_int * 5)(5, 1, 4, 2, 3)
libc.qsort(values, 5, ctypes.sizeof(ctypes.c_int), Compare(lambda a, b: a[0] - b[0]))
print(list(values))
"""
    result = isolated_session.execute(code, timeout_s=10)
    assert (result.status, result.stdout) == ("ok", "[1, 2, 3, 4, 5]\n"), result.to_dict()
    host.next_execution_works(isolated_session)


EMPTY_FILES = """
import os
os.mkdir("/tmp/many")
for n in range(400_000):
    os.close(os.open(f"/tmp/many/{n}", os.O_CREAT | os.O_WRONLY, 0o600))
print("RESULT: ESCAPED", n + 1)
"""


def test_empty_files_count_as_memory(low_memory_session: SandboxSession, host) -> None:
    """Empty files hold no pages of their tmpfs but about 1 KiB of kernel memory each: 400,000
    of them (about 400 MiB) are past a 192 MiB limit, held by the kernel or the host's watch."""
    result = low_memory_session.execute(EMPTY_FILES, timeout_s=30)
    assert (result.status, result.limit) == ("limit", "memory"), result.to_dict()
    host.next_execution_works(low_memory_session)


SOCKET_BUFFERS = """
import os, socket, time
def hold():
    held = []
    for _ in range(120):
        pair = socket.socketpair()
        for end in pair:
            end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            end.setblocking(False)
            try:
                while True:
                    end.send(b"x" * 65536)
            except BlockingIOError:
                pass
        held.append(pair)
    return held
ready, tell = os.pipe()
for _ in range(6):
    if os.fork() == 0:
        held = hold()
        os.write(tell, b"x")
        time.sleep(60)
        os._exit(0)
got = 0
while got < 6:
    got += len(os.read(ready, 6))
time.sleep(60)
"""


def test_socket_buffers_count_as_memory(low_memory_session: SandboxSession, host) -> None:
    """1,440 sockets, each with its send buffer full, in six processes: kernel memory in no
    process's RSS; past a 192 MiB limit, held by the kernel or the host's watch."""
    result = low_memory_session.execute(SOCKET_BUFFERS, timeout_s=30)
    assert (result.status, result.limit) == ("limit", "memory"), result.to_dict()
    host.next_execution_works(low_memory_session)


def test_a_late_tick_leaves_the_next_execution_its_own_limit(
    low_memory_session: SandboxSession, host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watchdog tick that listed an execution, then waited (for the GIL, on a busy machine)
    until the next execution had filled the sandbox: the limit the result names is the next
    execution's own ("memory"), not a kill in the ended one's name ("sandbox_exit", seen once
    in CI where only the host's watch holds memory)."""
    check = Watched.check

    def late_check(self: Watched) -> str | None:
        if threading.current_thread().name == "codemode-sandbox-watchdog":
            time.sleep(0.15)
        return check(self)

    monkeypatch.setattr(Watched, "check", late_check)
    low_memory_session.execute("import time; time.sleep(0.06)")  # a tick lists it
    result = low_memory_session.execute(SOCKET_BUFFERS, timeout_s=30)
    assert (result.status, result.limit) == ("limit", "memory"), result.to_dict()
    host.next_execution_works(low_memory_session)


def test_socket_buffers_keep_their_default_size(isolated_session: SandboxSession, host) -> None:
    """Raising a socket's buffer succeeds and changes nothing (it would hold memory the host's
    count of default buffers does not see)."""
    code = """
import socket
left, right = socket.socketpair()
before = left.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
    left.setsockopt(socket.SOL_SOCKET, option, 64 << 20)
after = left.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
print("RESULT:", "BLOCKED" if after == before else f"ESCAPED {before} -> {after}")
"""
    result = isolated_session.execute(code, timeout_s=10)
    assert result.stdout == "RESULT: BLOCKED\n", result.to_dict()
    host.next_execution_works(isolated_session)

"""Processes that try to outlive the execution, and signalling or tracing from inside.

After each execution the live sandbox must hold only bwrap's pid 1 and the guest: the host lists
the sandbox's process tree itself (``host.extra_sandbox_processes``).
"""

from __future__ import annotations

import errno

import pytest

from codemode.sandbox import SandboxSession

pytestmark = pytest.mark.hostile

SURVIVORS = {
    "double-forked setsid daemon": """
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "1000"])
    os._exit(0)
os.wait()
""",
    "nohup sleep in a new session": """
import subprocess
subprocess.Popen(["nohup", "sleep", "1000"], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
""",
    "child ignoring SIGTERM and SIGHUP": """
import os, signal
r, w = os.pipe()
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    os.write(w, b"x")
    while True:
        pass
os.read(r, 1)
""",
    "stopped child": """
import os, signal
pid = os.fork()
if pid == 0:
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
os.waitpid(pid, os.WUNTRACED)
""",
    "unreaped zombie child": """
import os
r, w = os.pipe()
if os.fork() == 0:
    os._exit(0)
""",
    "orphaned grandchildren tree": """
import subprocess
subprocess.Popen(["sh", "-c", "(sleep 1000 &) ; (sleep 1000 &) ; sleep 1000 &"])
""",
    "shell background job with disown": """
import subprocess
subprocess.run(["sh", "-c", "sleep 1000 & echo started"], check=True)
""",
}


@pytest.mark.parametrize("code", SURVIVORS.values(), ids=SURVIVORS.keys())
def test_no_process_outlives_the_execution(
    isolated_session: SandboxSession, host, code: str
) -> None:
    result = isolated_session.execute(code, timeout_s=5)
    assert result.status == "ok", result.to_dict()
    assert result.sandbox_reset is False
    assert host.extra_sandbox_processes(isolated_session) == []
    host.next_execution_works(isolated_session)


def test_threads_never_run_between_executions(isolated_session: SandboxSession, host) -> None:
    """A thread the code leaves behind is frozen (cgroup freezer) or the sandbox replaced:
    it never runs while no execution is in progress, outside every limit."""
    import time as host_time

    started = isolated_session.execute(
        "import threading, time\n"
        "ticks = []\n"
        "def spin():\n    while True:\n        ticks.append(time.monotonic())\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
        "time.sleep(0.05)",
        timeout_s=5,
    )
    assert started.status == "ok"
    ended = host_time.monotonic()
    host.pause(0.5)
    resumed = host_time.monotonic()
    later = isolated_session.execute(
        f"print('ticks' not in globals() or not any({ended + 0.05} < t < {resumed - 0.05} "
        "for t in list(ticks)))",
        timeout_s=5,
    )
    assert later.stdout == "True\n", later.to_dict()
    host.next_execution_works(isolated_session)


SYSCALLS = {
    # name: (number on x86_64, arguments)
    "ptrace(PTRACE_ATTACH, 1)": (101, (16, 1, 0, 0)),
    "ptrace(PTRACE_TRACEME)": (101, (0, 0, 0, 0)),
    "process_vm_readv(1)": (310, (1, 0, 0, 0, 0, 0)),
    "process_vm_writev(1)": (311, (1, 0, 0, 0, 0, 0)),
    "unshare(CLONE_NEWUSER)": (272, (0x10000000,)),
    "unshare(CLONE_NEWNS)": (272, (0x00020000,)),
    "unshare(CLONE_NEWNET)": (272, (0x40000000,)),
    "setns(0, 0)": (308, (0, 0)),
    "mount(tmpfs)": (165, ("none", "/tmp", "tmpfs", 0, 0)),
    "umount2(/workspace)": (166, ("/workspace", 2)),
    "pivot_root": (155, ("/tmp", "/tmp")),
    "chroot(/tmp)": (161, ("/tmp",)),
    "clone(CLONE_NEWUSER)": (56, (0x10000000 | 17, 0, 0, 0, 0)),
    "clone(CLONE_NEWPID)": (56, (0x20000000 | 17, 0, 0, 0, 0)),
    "clone3": (435, (0, 0)),
    "io_uring_setup": (425, (8, 0)),
    "bpf(BPF_PROG_LOAD)": (321, (5, 0, 0)),
    "userfaultfd": (323, (0,)),
    "keyctl(KEYCTL_GET_KEYRING_ID)": (250, (0, -3 & 0xFFFFFFFF, 0)),
    "add_key": (248, ("user", "k", 0, 0, -3 & 0xFFFFFFFF)),
    "request_key": (249, ("user", "k", 0, 0)),
    "perf_event_open": (298, (0, 0, -1 & 0xFFFFFFFFFFFFFFFF, -1 & 0xFFFFFFFFFFFFFFFF, 0)),
    "kexec_load": (246, (0, 0, 0, 0)),
    "init_module": (175, (0, 0, "")),
    "finit_module": (313, (0, "", 0)),
    "reboot": (169, (0xFEE1DEAD, 672274793, 0x4321FEDC, 0)),
    "swapon": (167, ("/workspace/x", 0)),
    "syslog(READ_ALL)": (103, (3, 0, 0)),
    "open_by_handle_at": (304, (0, 0, 0)),
    "name_to_handle_at": (303, (-100 & 0xFFFFFFFF, "/", 0, 0, 0)),
    "kcmp": (312, (1, 1, 0, 0, 0)),
    "pidfd_getfd": (438, (0, 0, 0)),
    "fsopen(tmpfs)": (430, ("tmpfs", 0)),
    "open_tree": (428, (-100 & 0xFFFFFFFF, "/", 1)),
    "sethostname": (170, ("evil", 4)),
    "settimeofday": (164, (0, 0)),
    "acct": (163, ("/workspace/acct",)),
    "personality(READ_IMPLIES_EXEC)": (135, (0x0400000,)),
    "iopl(3)": (172, (3,)),
    "landlock_create_ruleset": (444, (0, 0, 0)),
}

SYSCALL_PROBE = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
args = [ctypes.c_char_p(a.encode()) if isinstance(a, str) else ctypes.c_ulong(a) for a in {args!r}]
ctypes.set_errno(0)
rc = libc.syscall(ctypes.c_long({number}), *args)
err = ctypes.get_errno()
print("RESULT:", "ESCAPED" if rc >= 0 else "BLOCKED", err)
"""


@pytest.mark.parametrize(("number", "args"), SYSCALLS.values(), ids=SYSCALLS.keys())
def test_dangerous_syscalls_are_refused(
    isolated_session: SandboxSession, host, number: int, args: tuple[object, ...]
) -> None:
    result = isolated_session.execute(SYSCALL_PROBE.format(number=number, args=args), timeout_s=5)
    assert result.status == "ok", result.to_dict()
    verdict, code = result.stdout.split()[1:]
    assert verdict == "BLOCKED", result.stdout
    assert int(code) in (errno.EPERM, errno.ENOSYS), result.stdout
    assert host.extra_sandbox_processes(isolated_session) == []
    host.next_execution_works(isolated_session)


# A process in the sandbox without the seccomp filter (bwrap's own pid 1, once) would let code
# that writes its /proc/<pid>/mem run unfiltered. The guest is pid 1 itself: every process in
# the sandbox, pid 1 included, must show the filter (Seccomp: 2) and no_new_privs.
PROC_MEMORY = """
import os, subprocess
child = subprocess.Popen(["sleep", "30"])
hits = []
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    status = dict(
        line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":" in line
    )
    if status["Seccomp"].strip() != "2" or status["NoNewPrivs"].strip() != "1":
        hits.append(pid)
if os.getpid() != 1:
    hits.append("the guest is not pid 1")
child.kill()
print("RESULT:", "ESCAPED " + repr(hits) if hits else "BLOCKED")
"""


def test_every_process_in_the_sandbox_is_filtered(isolated_session: SandboxSession, host) -> None:
    result = isolated_session.execute(PROC_MEMORY, timeout_s=5)
    assert result.stdout == "RESULT: BLOCKED\n", result.stdout
    host.next_execution_works(isolated_session)


SIGNALS = {
    "kill(-1, SIGKILL)": ("import os, signal, subprocess\nsubprocess.Popen(['sleep', '99'])\nos.kill(-1, signal.SIGKILL)\nprint('alive')", "ok"),
    "kill(-1, SIGSTOP)": ("import os, signal, subprocess\nsubprocess.Popen(['sleep', '99'])\nos.kill(-1, signal.SIGSTOP)\nprint('alive')", "ok"),
    # The guest is pid 1 of its namespace: signals sent from inside cannot kill it.
    "kill pid 1 (the guest)": ("import os, signal\nos.kill(1, signal.SIGKILL)\nprint('alive')", "ok"),
    "kill the parent": (
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('alive')", "ok"),
    "kill process group 0": (
        "import os, signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "os.killpg(0, signal.SIGTERM)\nprint('alive')", "ok"),
    "kill itself": ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\nprint('alive')", "ok"),
    "os._exit": ("import os\nos._exit(7)", "limit"),
    "abort": ("import os\nos.abort()", "limit"),
    "close the bridge": ("import sys\nsys.modules['servers._runtime'].bridge.sock.close()\n"
                         "import os\nos.close(1)", "limit"),
    "segfault": ("import ctypes\nctypes.string_at(0)", "limit"),
}  # fmt: skip


@pytest.mark.parametrize(("code", "status"), SIGNALS.values(), ids=SIGNALS.keys())
def test_signals_inside_end_cleanly(
    isolated_session: SandboxSession, host, code: str, status: str
) -> None:
    result = isolated_session.execute(code, timeout_s=3)
    if status == "ok":
        assert (result.status, result.stdout) == ("ok", "alive\n"), result.to_dict()
    else:
        assert (result.status, result.limit) == ("limit", "sandbox_exit"), result.to_dict()
        assert result.sandbox_reset is True
    host.next_execution_works(isolated_session)


def test_host_pids_cannot_be_signalled(isolated_session: SandboxSession, host) -> None:
    import os

    code = f"""
import os
reached = []
for pid in {sorted({os.getpid(), os.getppid(), 1})!r} + list(range(3, 300)):
    try:
        os.kill(pid, 0)
        reached.append(pid)
    except ProcessLookupError:
        pass
    except PermissionError:
        reached.append(pid)
print("RESULT:", "ESCAPED " + repr(reached) if set(reached) - {{1}} else "BLOCKED")
"""
    result = isolated_session.execute(code, timeout_s=5)
    assert result.stdout == "RESULT: BLOCKED\n", result.stdout
    host.next_execution_works(isolated_session)

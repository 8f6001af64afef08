"""Resource exhaustion: processes, memory, CPU, disk, inodes and output floods.

Each attack must end with the exact status and limit, the sandbox must be replaced when it was
killed, the host's own memory must stay bounded, and the next execution must work.
"""

from __future__ import annotations

import resource

import pytest

from codemode.sandbox import SandboxSession

pytestmark = pytest.mark.hostile

FORK_BOMBS = {
    "os.fork loop": """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
""",
    "fork and sleep": """
import os, time
while True:
    if os.fork() == 0:
        time.sleep(100)
        os._exit(0)
""",
    "subprocess loop": """
import subprocess
children = []
while True:
    children.append(subprocess.Popen(["sleep", "100"]))
""",
    "shell fork bomb": """
import subprocess
import time
subprocess.run(["sh", "-c", "b() { b | b & }; b"], timeout=100)
time.sleep(100)  # the bomb runs on in the background, reparented to the sandbox's pid 1
""",
    "threading bomb": """
import threading
threading.stack_size(64 << 10)  # small stacks: the thread count, not memory, runs out
stop = threading.Event()
while True:
    threading.Thread(target=stop.wait, daemon=True).start()
""",
    "multiprocessing": """
import multiprocessing, time
procs = []
while True:
    p = multiprocessing.Process(target=time.sleep, args=(100,))
    p.start()
    procs.append(p)
""",
    "posix_spawn loop": """
import os
while True:
    os.posix_spawn("/bin/sleep", ["sleep", "100"], {})
""",
}


@pytest.mark.parametrize("code", FORK_BOMBS.values(), ids=FORK_BOMBS.keys())
def test_fork_bombs_hit_the_process_limit(
    isolated_session: SandboxSession, host, code: str
) -> None:
    result = isolated_session.execute(code, timeout_s=5)
    assert (result.status, result.limit) == ("limit", "processes"), result.to_dict()
    assert result.sandbox_reset is True
    assert result.duration_ms < 4000
    host.next_execution_works(isolated_session)


MEMORY_BOMBS = {
    "bytearray": "blocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))",
    "list growth": "items = []\nwhile True:\n    items.append(' ' * (1 << 20))",
    "one huge allocation": "x = bytearray(4 << 30)",
    "string doubling": "s = 'x'\nwhile True:\n    s += s",
    "mmap anonymous, touched": """
import mmap
maps = []
while True:
    m = mmap.mmap(-1, 32 << 20)
    for offset in range(0, 32 << 20, 4096):
        m[offset] = 1
    maps.append(m)
""",
    "tmpfs and heap together": """
for path, mib in (("/tmp/f", 250), ("/dev/shm/f", 63), ("/workspace/f", 63)):
    with open(path, "wb") as handle:
        for _ in range(mib):
            handle.write(b"\\1" * (1 << 20))
blocks = []
while True:
    blocks.append(bytearray(32 << 20))
""",
    "thread stacks": """
import threading
stop = threading.Event()
while True:
    threading.Thread(target=stop.wait, daemon=True).start()
""",
    "memory in a child": """
import os
pid = os.fork()
if pid == 0:
    blocks = []
    while True:
        blocks.append(bytearray(64 << 20))
        blocks[-1][::4096] = b"\\1" * len(blocks[-1][::4096])
os.waitpid(pid, 0)
""",
}


@pytest.mark.parametrize("code", MEMORY_BOMBS.values(), ids=MEMORY_BOMBS.keys())
def test_memory_bombs_hit_the_memory_limit(
    isolated_session: SandboxSession, host, code: str
) -> None:
    """KNOWN GAP for "mmap anonymous, touched" and "thread stacks": when RLIMIT_AS (not the
    cgroup) runs out first, the code sees OSError(ENOMEM) or "can't start new thread" and the
    result says status "error" instead of limit "memory"."""
    result = isolated_session.execute(code, timeout_s=8)
    assert (result.status, result.limit) == ("limit", "memory"), result.to_dict()
    assert result.sandbox_reset is True
    host.next_execution_works(isolated_session)


CPU_BURNERS = {
    "pure loop": "while True:\n    pass",
    "C-level sum": "sum(range(10 ** 12))",
    "regex backtracking": "import re\nre.match(r'(a+)+$', 'a' * 64 + 'b')",
    "huge power": "x = 10 ** (10 ** 9)",
    "signals ignored": (
        "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM):\n"
        "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass"
    ),
    "two threads spinning": (
        "import threading\ndef spin():\n    while True:\n        pass\n"
        "threading.Thread(target=spin).start()\nspin()"
    ),
    "sleep forever": "import time\ntime.sleep(10 ** 6)",
    "blocked on the bridge socket": (
        "import sys\nsys.modules['servers._runtime'].bridge.sock.recv(1)"
    ),
}


@pytest.mark.parametrize("code", CPU_BURNERS.values(), ids=CPU_BURNERS.keys())
def test_cpu_and_blocking_code_times_out_on_time(
    isolated_session: SandboxSession, host, code: str
) -> None:
    result = isolated_session.execute(code, timeout_s=1.5)
    assert (result.status, result.limit) == ("timeout", "wall_time"), result.to_dict()
    assert 1500 <= result.duration_ms < 2300, result.duration_ms
    assert result.sandbox_reset is True
    host.next_execution_works(isolated_session)


DISK_FILLS = {
    "workspace": ("/workspace/fill", 64),
    "workspace subdirectory": ("/workspace/a/b/fill", 64),
    "/dev/shm": ("/dev/shm/fill", 64),
    "/tmp": ("/tmp/fill", 256),
}

DISK_PROBE = """
import os
path, cap_mib = {path!r}, {cap}
os.makedirs(os.path.dirname(path), exist_ok=True)
written = 0
try:
    with open(path, "wb") as handle:
        while written < (cap_mib + 64) << 20:
            handle.write(b"\\0" * (1 << 20))
            written += 1 << 20
    print("RESULT: ESCAPED", written)
except OSError as error:
    print("RESULT: BLOCKED", error.errno, written <= cap_mib << 20)
os.unlink(path)
"""


@pytest.mark.parametrize(("path", "cap"), DISK_FILLS.values(), ids=DISK_FILLS.keys())
def test_disk_fills_stop_at_their_quota(
    isolated_session: SandboxSession, host, path: str, cap: int
) -> None:
    result = isolated_session.execute(DISK_PROBE.format(path=path, cap=cap), timeout_s=10)
    assert result.stdout == "RESULT: BLOCKED 28 True\n", result.to_dict()
    host.next_execution_works(isolated_session)


def test_workspace_inode_limit_is_enforced(isolated_session: SandboxSession, host) -> None:
    """Limits.workspace_inodes (100,000): bwrap's tmpfs takes no inode option, so the host
    watches the workspace's inode count and ends the execution when it passes the limit."""
    code = """
n = 0
while n < 150_000:
    open(f"f{n}", "w").close()
    n += 1
print("RESULT: ESCAPED", n)
"""
    result = isolated_session.execute(code, timeout_s=20)
    assert (result.status, result.limit) == ("limit", "workspace_inodes"), result.to_dict()
    assert "RESULT: ESCAPED" not in result.stdout
    assert result.sandbox_reset is True
    host.next_execution_works(isolated_session)


def test_many_small_files_do_not_break_the_result(isolated_session: SandboxSession, host) -> None:
    code = "import os\nfor i in range(20000):\n    open(f'small{i}', 'w').write('x')"
    result = isolated_session.execute(code, timeout_s=10)
    assert result.status == "ok"
    assert len(result.files["created"]) == 200  # the list is capped, the scan bounded
    host.next_execution_works(isolated_session)


OUTPUT_FLOODS = {
    "stdout": ("import sys\nchunk = 'o' * (1 << 20)\nfor _ in range(150):\n"
               "    sys.stdout.write(chunk)", "stdout", 150 << 20),
    "stderr": ("import sys\nchunk = 'e' * (1 << 20)\nfor _ in range(150):\n"
               "    sys.stderr.write(chunk)", "stderr", 150 << 20),
    "raw fd 1 without newlines": ("import os\nchunk = b'r' * (1 << 20)\nfor _ in range(150):\n"
                                  "    os.write(1, chunk)", "stdout", 150 << 20),
    "child process on fd 1": ("import subprocess\nsubprocess.run(['head', '-c', str(150 << 20),"
                              " '/dev/zero'], check=True)", "stdout", 150 << 20),
    "child process on fd 2": ("import subprocess, sys\nsubprocess.run(['head', '-c', "
                              "str(150 << 20), '/dev/zero'], stdout=sys.stderr, check=True)",
                              "stderr", 150 << 20),
}  # fmt: skip


@pytest.mark.parametrize(
    ("code", "stream", "total"), OUTPUT_FLOODS.values(), ids=OUTPUT_FLOODS.keys()
)
def test_output_floods_are_capped(
    isolated_session: SandboxSession, host, code: str, stream: str, total: int
) -> None:
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = isolated_session.execute(code, timeout_s=20)
    growth_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    assert result.status == "ok", result.to_dict()
    assert result.truncated[f"{stream}_total_bytes"] == total
    assert result.truncated[f"{stream}_bytes"] > total - 4000
    text = result.stdout if stream == "stdout" else result.stderr
    assert "omitted" in text
    assert len(text) < 2200
    assert growth_kib < 48 * 1024, f"host peak RSS grew by {growth_kib} KiB"
    host.next_execution_works(isolated_session)


def test_both_streams_flooded_at_once(isolated_session: SandboxSession, host) -> None:
    code = """
import sys, threading
def flood(stream, ch):
    chunk = ch * (1 << 20)
    for _ in range(80):
        stream.write(chunk)
    stream.flush()
t = threading.Thread(target=flood, args=(sys.stderr, "e"))
t.start()
flood(sys.stdout, "o")
t.join()
"""
    result = isolated_session.execute(code, timeout_s=20)
    assert result.status == "ok", result.to_dict()
    assert result.truncated["stdout_total_bytes"] == 80 << 20
    assert result.truncated["stderr_total_bytes"] == 80 << 20
    host.next_execution_works(isolated_session)


def test_output_flood_then_timeout(isolated_session: SandboxSession, host) -> None:
    result = isolated_session.execute("while True:\n    print('y' * 1000)", timeout_s=1.5)
    assert (result.status, result.limit) == ("timeout", "wall_time")
    assert result.truncated["stdout_total_bytes"] > 1 << 20
    assert len(result.stdout) < 1200
    host.next_execution_works(isolated_session)

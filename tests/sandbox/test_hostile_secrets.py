"""Reading host files and secrets: files, /proc, the environment, inherited descriptors.

Every payload prints ``RESULT: BLOCKED`` or ``RESULT: ESCAPED <what>``; each test asserts the
exact BLOCKED line, so it fails the moment the protection it names breaks.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from codemode.sandbox import SandboxSession

pytestmark = pytest.mark.hostile

REPO = Path(__file__).resolve().parents[2]

READ_PROBE = """
import os
path = {path!r}
try:
    if os.path.isdir(path):
        leaked = os.listdir(path)
    else:
        with open(path, "rb") as handle:
            leaked = handle.read(256)
except OSError:
    leaked = None
print("RESULT:", "ESCAPED " + repr(leaked)[:200] if leaked else "BLOCKED")
"""

HOST_PATHS = [
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/machine-id",
    "/root",
    "/root/.ssh/id_rsa",
    "/root/.bash_history",
    "/root/.cache",
    "/root/.pyenv",
    "/home",
    "/work",
    "/work/main",
    "/work/shared",
    "/work/main/.git/config",
    "/work/main/.venv",
    "/work/main/.venv/bin",
    str(REPO / "src"),
    str(REPO / "src" / "codemode" / "sandbox" / "backends.py"),
    str(REPO / "pyproject.toml"),
    "/var/lib",
    "/var/log",
    "/opt",
    "/srv",
    "/mnt",
    "/boot",
    "/run",
    "/sys",
    "/sys/fs/cgroup",
    "/sys/class/net",
    "/sys/kernel/security",
    "/proc/kcore",
    "/proc/1/environ",
    "/proc/2/environ",
    "/proc/self/environ",
    "/proc/1/root/etc/shadow",
    "/proc/1/cwd/etc/shadow",
    "/dev/vda",
    "/dev/sda",
    "/dev/mem",
    "/dev/kmsg",
    "/dev/port",
    "/tmp/../etc/shadow",
]


@pytest.mark.parametrize("path", HOST_PATHS)
def test_host_path_is_unreadable(isolated_session: SandboxSession, host, path: str) -> None:
    result = isolated_session.execute(READ_PROBE.format(path=path), timeout_s=5)
    assert result.stdout == "RESULT: BLOCKED\n", result.stdout
    host.next_execution_works(isolated_session)


def test_repository_and_host_package_are_not_importable(
    isolated_session: SandboxSession, host
) -> None:
    code = """
import importlib
found = []
for name in ("codemode", "codemode.sandbox", "codemode.bridge.host", "tests"):
    try:
        importlib.import_module(name)
        found.append(name)
    except ImportError:
        pass
print("RESULT:", "ESCAPED " + repr(found) if found else "BLOCKED")
"""
    result = isolated_session.execute(code, timeout_s=5)
    assert result.stdout == "RESULT: BLOCKED\n"
    host.next_execution_works(isolated_session)


ISOLATION_FACTS = """
import os, socket
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
status = {k: v.strip() for k, v in status.items()}
facts = {
    "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "hostname": socket.gethostname(),
    "caps": {status[k] for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")},
    "no_new_privs": status["NoNewPrivs"], "seccomp": status["Seccomp"],
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "me": os.getpid(),
    "sys": os.path.exists("/sys"),
    "dev": sorted(os.listdir("/dev")),
    "root": sorted(os.listdir("/")),
}
print(repr(facts))
"""


def test_isolation_facts_from_inside(isolated_session: SandboxSession, host) -> None:
    import ast

    result = isolated_session.execute(ISOLATION_FACTS, timeout_s=5)
    facts = ast.literal_eval(result.stdout.strip())
    assert (facts["uid"], facts["gid"], facts["groups"]) == (1000, 1000, [])
    assert facts["hostname"] == "sandbox"
    assert facts["caps"] == {"0000000000000000"}
    assert (facts["no_new_privs"], facts["seccomp"]) == ("1", "2")
    # A private pid namespace: the guest is pid 1 and alone; nothing of the host.
    assert (facts["pids"], facts["me"]) == ([1], 1)
    assert facts["sys"] is False
    assert facts["dev"] == [
        "core", "fd", "full", "null", "ptmx", "pts", "random", "shm",
        "stderr", "stdin", "stdout", "tty", "urandom", "zero",
    ]  # fmt: skip
    assert "home" not in facts["root"] and "var" not in facts["root"]
    host.next_execution_works(isolated_session)


INHERITED_FDS = """
import os, stat, sys
bridge = sys.modules["servers._runtime"].bridge.sock.fileno()
fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
opened = []
for fd in fds:
    try:
        os.fstat(fd)
        opened.append(fd)
    except OSError:
        pass  # the descriptor listdir itself used, already closed
kinds = {fd: os.readlink(f"/proc/self/fd/{fd}").split(":")[0] for fd in opened}
extra = [fd for fd in opened if fd not in (0, 1, 2, bridge)]
ok = not extra and kinds[0] == "/dev/null" and kinds[1] == kinds[2] == "pipe" and kinds[bridge] == "socket"
print("RESULT:", "BLOCKED" if ok else "ESCAPED " + repr(kinds))
"""


def test_only_stdio_and_the_bridge_are_inherited(isolated_session: SandboxSession, host) -> None:
    result = isolated_session.execute(INHERITED_FDS, timeout_s=5)
    assert result.stdout == "RESULT: BLOCKED\n", result.stdout
    host.next_execution_works(isolated_session)


def test_proc_environ_files_are_empty(isolated_session: SandboxSession, host) -> None:
    code = """
import glob
full = {p: open(p, "rb").read() for p in glob.glob("/proc/[0-9]*/environ") + ["/proc/self/environ"]}
leaks = {p: v[:80] for p, v in full.items() if v}
print("RESULT:", "ESCAPED " + repr(leaks) if leaks or len(full) < 2 else "BLOCKED")
"""
    result = isolated_session.execute(code, timeout_s=5)
    assert result.stdout == "RESULT: BLOCKED\n", result.stdout
    host.next_execution_works(isolated_session)


# The canary scan: everything the code can read that could carry the host's environment.
CANARY_SCAN = """
import os, sys
needle = {secret!r}.encode()
skip = ("/proc", "/sys", "/dev", "/usr", {prefix!r}, *[p for p in sys.path if p.startswith("/work")])
hits = []
if any(needle.decode() in f"{{k}}={{v}}" for k, v in os.environ.items()):
    hits.append("os.environ")
for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self", "thread-self"]:
    for name in ("environ", "cmdline"):
        try:
            if needle in open(f"/proc/{{pid}}/{{name}}", "rb").read():
                hits.append(f"/proc/{{pid}}/{{name}}")
        except OSError:
            pass
for fd in os.listdir("/proc/self/fd"):
    try:
        if needle.decode() in os.readlink(f"/proc/self/fd/{{fd}}"):
            hits.append(f"fd {{fd}}")
    except OSError:
        pass
scanned = 0
for top, dirs, files in os.walk("/"):
    if top.startswith(skip) and top != "/":
        dirs[:] = []
        continue
    dirs[:] = [d for d in dirs if not os.path.join(top, d).startswith(skip)]
    for name in files:
        path = os.path.join(top, name)
        try:
            with open(path, "rb") as handle:
                scanned += 1
                if needle in handle.read(1 << 20):
                    hits.append(path)
        except OSError:
            pass
print("scanned", scanned)
print("RESULT:", "ESCAPED " + repr(hits) if hits else "BLOCKED")
"""


def test_host_environment_canary_is_unreachable(
    canary_session: SandboxSession, canary_secret: str, host
) -> None:
    import os

    assert os.environ["CODEMODE_CANARY_SECRET"] == canary_secret
    code = CANARY_SCAN.format(secret=canary_secret, prefix=sys.base_prefix)
    # Leave a file in the workspace and /tmp so the walk has something to read.
    canary_session.execute("open('note.txt', 'w').write('x'); open('/tmp/n', 'w').write('y')")
    result = canary_session.execute(code, timeout_s=10)
    assert result.stdout.splitlines()[-1] == "RESULT: BLOCKED", result.stdout
    scanned = int(result.stdout.split()[1])
    assert scanned >= 4  # /etc/passwd, /etc/group, note.txt, /tmp/n at least
    # The scan itself is honest: the same code finds a secret that is really there.
    planted = canary_session.execute(
        f"open('/tmp/plant', 'w').write({canary_secret!r})\n" + code, timeout_s=10
    )
    assert planted.stdout.splitlines()[-1] == "RESULT: ESCAPED ['/tmp/plant']"
    host.next_execution_works(canary_session)


# Files of the kernel only the host's root may read. Started as root, the sandbox's uid is the
# host's kuid 0, so their mode alone would let the code read them: the kernel heap's layout,
# physical page flags, timers, and the host's keyrings (their names show the host's uid).
ROOT_ONLY_PROC = [
    "keys",
    "key-users",
    "timer_list",
    "slabinfo",
    "vmallocinfo",
    "pagetypeinfo",
    "kpageflags",
    "kpagecount",
    "kpagecgroup",
    "kcore",
]

ROOT_ONLY_PROBE = """
names = {names!r}
leaks, present = {{}}, 0
for name in names:
    try:
        with open("/proc/" + name, "rb") as handle:
            present += 1
            data = handle.read(200)
    except FileNotFoundError:
        continue
    except OSError:
        present += 1
        continue
    if data:
        leaks[name] = data[:60]
print("present", present)
print("RESULT:", "ESCAPED " + repr(leaks) if leaks else "BLOCKED")
"""


def test_root_only_kernel_files_are_empty(isolated_session: SandboxSession, host) -> None:
    import os

    result = isolated_session.execute(ROOT_ONLY_PROBE.format(names=ROOT_ONLY_PROC), timeout_s=5)
    assert result.stdout.splitlines()[-1] == "RESULT: BLOCKED", result.stdout
    # The probe looked at real files: the host's kernel has them, so the sandbox's /proc too.
    on_host = sum(os.path.lexists(f"/proc/{name}") for name in ROOT_ONLY_PROC)
    assert int(result.stdout.split()[1]) == on_host > 0, result.stdout
    host.next_execution_works(isolated_session)

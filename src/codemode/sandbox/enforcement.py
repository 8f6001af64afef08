"""How each sandbox limit is enforced on this machine, for this user, and whether that is enough.

Three situations:

- **cgroups** (the host's root, or a delegated cgroup v2 subtree): the kernel caps memory (every
  process and its tmpfs pages) and tasks and accounts CPU.
- **no cgroups, an ordinary user** (also uid 0 in a user namespace, a rootless container): the
  host watches the sandbox (memory of every process plus its tmpfs mounts, CPU of every process
  that ever ran), ``RLIMIT_NPROC`` caps tasks inside the sandbox's own user namespace (so the
  user's other processes do not count).
- **no cgroups, and RLIMIT_NPROC does not apply** (the host's root without writable cgroups):
  nothing in the kernel caps the number of tasks. Codemode refuses to start sandboxes unless
  the config accepts that by name: ``sandbox.accept_unenforced_limits = ["processes"]``.

In all three, SIGSTOP stops every process of the sandbox between executions, except a guest
alone that provably cannot run until its next frame (``resting``), which is left asleep.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from codemode.errors import IsolationUnavailableError
from codemode.sandbox.cgroups import CgroupPlace, find_cgroup_place

__all__ = ["Enforcement", "detect_enforcement", "rlimit_nproc_applies"]

_BETWEEN = (
    "SIGSTOP of every process of the sandbox, or none for a guest alone that provably cannot "
    "run until its next frame (one thread, no child, waiting with every caught signal blocked)"
)

_NPROC_PROBE = """
import os, resource
resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))
try:
    pid = os.fork()
except OSError:
    raise SystemExit(3)
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
"""


@functools.cache
def rlimit_nproc_applies() -> bool:
    """Does RLIMIT_NPROC stop our uid? Not for the host's root (kuid 0), in whatever user
    namespace it runs; yes for everyone else. Measured once: a child with a limit of one task
    tries to fork."""
    try:
        probe = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _NPROC_PROBE],
            env={},
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 3


@dataclass(frozen=True)
class Enforcement:
    """What this machine offers; ``how`` says it in words, ``check`` refuses what is missing."""

    cgroups: CgroupPlace | None
    # Measured only without cgroups (None otherwise).
    nproc_applies: bool | None = None

    @property
    def unenforced(self) -> list[str]:
        """Limits nothing in the kernel enforces here (the host could only watch them)."""
        if self.cgroups is None and not self.nproc_applies:
            return ["processes"]
        return []

    @property
    def how(self) -> dict[str, str]:
        if self.cgroups is not None:
            where = self.cgroups.describe()
            return {
                "memory": f"kernel: cgroup memory controller in {where}",
                "cpu_time": "host: cgroup CPU accounting, checked every 25 ms",
                "processes": "kernel: cgroup pids controller",
                "between executions": _BETWEEN,
            }
        watched = "host: checked every 25 ms, the sandbox is killed past the limit"
        return {
            "memory": f"{watched} (resident memory of every process plus the tmpfs mounts); "
            "kernel: RLIMIT_AS per process",
            "cpu_time": f"{watched} (every process that ever ran, reaped children included)",
            "processes": (
                "kernel: RLIMIT_NPROC inside the sandbox's own user namespace"
                if self.nproc_applies
                else "NOT ENFORCED: no cgroups here and RLIMIT_NPROC does not apply to this "
                "user (the host's root); the host only counts tasks every 25 ms"
            ),
            "between executions": _BETWEEN,
        }

    def describe(self) -> list[str]:
        return [f"sandbox {name}: {how}" for name, how in self.how.items()]

    def check(self, accepted: Iterable[str]) -> None:
        missing = [name for name in self.unenforced if name not in set(accepted)]
        if missing:
            names = ", ".join(missing)
            raise IsolationUnavailableError(
                f"the sandbox limit(s) {names} cannot be enforced here: no writable cgroups "
                "and RLIMIT_NPROC does not apply to the host's root, so a fork bomb could "
                "only be stopped by a watcher that polls",
                fix="run codemode as an ordinary user, or give it a writable cgroup hierarchy "
                "(cgroup v2 with pids and memory, or the v1 pids and memory controllers); to "
                f"run with the weaker limit anyway set sandbox.accept_unenforced_limits = "
                f"{missing!r}",
            )


def detect_enforcement() -> Enforcement:
    cgroups = find_cgroup_place()
    if cgroups is not None:
        return Enforcement(cgroups)
    return Enforcement(None, rlimit_nproc_applies())

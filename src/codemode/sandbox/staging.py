"""Keep host paths out of the sandbox's /proc/self/mountinfo.

A bind mount shows its source's path inside its filesystem (the user's home, the project's
virtualenv) in every process's mountinfo. So the interpreter and the site directories are not
bound: bwrap starts in a private user and mount namespace of its own (made between fork and
exec) in which each host directory is bound under a neutral staging path, and the sandbox
mounts each one as a read-only overlay of that path. An overlay has a superblock of its own,
so the sandbox sees only the staging path. The interpreter's original path is a symlink to its
overlay (not a mount), so its shared library is still found.
"""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Staging", "overlays_work"]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
# An existing directory of the host to stage under, in the private namespace only.
_STAGE_CANDIDATES = ("/mnt", "/run", "/media", "/srv")
_EMPTY = "empty"


def _stage_dir(sources: list[str]) -> str | None:
    """A candidate that holds none of the sources (they are bound by path after it is covered)."""
    for candidate in _STAGE_CANDIDATES:
        if not Path(candidate).is_dir() or Path(candidate).is_symlink():
            continue
        if not any(source == candidate or source.startswith(candidate + "/") for source in sources):
            return candidate
    return None


@dataclass(frozen=True)
class Staging:
    """Host directories (name -> path) to mount in the sandbox without their paths."""

    sources: dict[str, str]
    stage: str

    @classmethod
    def create(cls, sources: dict[str, str]) -> Staging | None:
        real = {name: os.path.realpath(path) for name, path in sources.items()}
        stage = _stage_dir(list(real.values()))
        return None if stage is None else cls(real, stage)

    def overlay_args(self, name: str, target: str) -> list[str]:
        """bwrap arguments mounting the staged ``name`` read-only at ``target``."""
        return [
            "--overlay-src", f"{self.stage}/{name}",
            "--overlay-src", f"{self.stage}/{_EMPTY}",
            "--ro-overlay", target,
        ]  # fmt: skip

    def child_setup(self) -> Callable[[], None]:
        """A step for between fork and exec: the private namespace with the staged binds.
        Paths are resolved after ``unshare`` (a mount of another namespace cannot be bound)."""
        libc = ctypes.CDLL(None, use_errno=True)
        unshare, mount = libc.unshare, libc.mount
        uid, gid = os.getuid(), os.getgid()
        stage = self.stage.encode()
        binds = [
            (path.encode(), f"{self.stage}/{name}".encode()) for name, path in self.sources.items()
        ]

        def setup() -> None:
            if unshare(_CLONE_NEWUSER | _CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), "unshare for the staging namespace failed")
            for path, text in (
                ("/proc/self/setgroups", "deny"),
                ("/proc/self/uid_map", f"{uid} {uid} 1"),
                ("/proc/self/gid_map", f"{gid} {gid} 1"),
            ):
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, text.encode())
                finally:
                    os.close(fd)
            _check(mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None))
            _check(mount(b"tmpfs", stage, b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=0700"))
            os.mkdir(stage + b"/" + _EMPTY.encode())
            for source, target in binds:
                os.mkdir(target)
                _check(mount(source, target, None, _MS_BIND | _MS_REC, None))

        return setup


def _check(rc: int) -> None:
    if rc != 0:
        raise OSError(ctypes.get_errno(), "mount in the staging namespace failed")


@functools.cache
def overlays_work(bwrap: str) -> bool:
    """Can bwrap mount a staged overlay here (bwrap >= 0.10, overlayfs in user namespaces)?"""
    staging = Staging.create({"probe": "/usr"})
    if staging is None:
        return False
    args = [bwrap, "--unshare-user", "--ro-bind", "/usr", "/usr"]
    args += ["--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64"]
    args += [*staging.overlay_args("probe", "/probe"), "--", "/probe/bin/true"]
    try:
        probe = subprocess.run(
            args,
            env={},
            capture_output=True,
            preexec_fn=staging.child_setup(),
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0

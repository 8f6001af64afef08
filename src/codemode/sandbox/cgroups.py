"""Per-sandbox control groups: a process cap, a memory cap, CPU accounting and a freezer.

Used wherever this process may create cgroups: as the host's root (cgroup v1 or v2), or in a
cgroup v2 subtree delegated to the user (a systemd unit with ``Delegate=yes``, e.g.
``systemd-run --user --scope -p Delegate=yes codemode serve``, or a container's own cgroup).
The memory controller counts the whole sandbox (every process and its tmpfs pages) and the pids
controller every task, which per-process rlimits cannot.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from codemode.sandbox.heldfiles import HeldFiles
from codemode.sandbox.proctree import read_small

__all__ = ["CgroupPlace", "CgroupSet", "find_cgroup_place"]

ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")
_PARENT = "codemode"
# In a delegated v2 subtree this process moves itself into this leaf, so that the subtree may
# enable controllers for its sandboxes (cgroup v2 allows no processes in an inner node).
HOST_LEAF = "codemode-host"
_V1_CONTROLLERS = ("pids", "memory", "cpuacct", "freezer")
_NEEDED = frozenset({"pids", "memory"})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _words(path: Path) -> set[str]:
    try:
        return {word.lstrip("+") for word in path.read_text().split()}
    except OSError:
        return set()


@dataclass(frozen=True)
class CgroupPlace:
    """Where this process creates sandbox cgroups: one parent per v1 controller, or one v2
    directory (under the key ``"v2"``)."""

    version: int
    parents: Mapping[str, Path]
    delegated: bool = False

    def describe(self) -> str:
        where = ", ".join(sorted({str(path) for path in self.parents.values()}))
        kind = "a delegated cgroup v2 subtree" if self.delegated else f"cgroup v{self.version}"
        return f"{kind} ({where})"


def find_cgroup_place(
    root: Path = ROOT, self_cgroup: Path = PROC_SELF_CGROUP
) -> CgroupPlace | None:
    """The place for sandbox cgroups on this machine, or None when there is none for us."""
    if (root / "cgroup.controllers").exists():
        if _words(root / "cgroup.controllers") >= _NEEDED and os.access(root, os.W_OK):
            parent = root / _PARENT
            with contextlib.suppress(OSError):
                parent.mkdir(exist_ok=True)
                if _enable(parent, _words(root / "cgroup.subtree_control")):
                    return CgroupPlace(2, {"v2": parent})
                parent.rmdir()  # a container's root cgroup: try it as a delegated one
        return _delegated(root, self_cgroup)
    if all(os.access(root / c, os.W_OK) for c in ("pids", "memory")):
        parents = {c: root / c / _PARENT for c in _V1_CONTROLLERS if (root / c).is_dir()}
        return CgroupPlace(1, parents)
    unified = root / "unified"
    if (unified / "cgroup.controllers").exists():
        return _delegated(unified, self_cgroup)
    return None


def _enable(directory: Path, available: set[str]) -> bool:
    """Enable pids, memory (and cpu when offered) for the children of ``directory``."""
    wanted = sorted(_NEEDED | ({"cpu"} & available))
    if not available >= _NEEDED:
        return False
    if set(wanted) <= _words(directory / "cgroup.subtree_control"):
        return True
    try:
        (directory / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
    except OSError:
        return False
    return _words(directory / "cgroup.subtree_control") >= _NEEDED


def _own_cgroup(mount: Path, self_cgroup: Path) -> Path | None:
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            return mount / line[3:].strip().lstrip("/")
    return None


def _delegated(mount: Path, self_cgroup: Path) -> CgroupPlace | None:
    """Our own v2 cgroup, when it is ours to manage (delegated): sandboxes become its children
    and this process moves into the leaf ``codemode-host`` beside them."""
    own = _own_cgroup(mount, self_cgroup)
    if own is None:
        return None
    base = own.parent if own.name == HOST_LEAF else own
    files = ("cgroup.procs", "cgroup.subtree_control")
    if not all(os.access(base / name, os.W_OK) for name in files):
        return None
    available = _words(base / "cgroup.controllers")
    if not available >= _NEEDED:
        return None
    if _enable(base, available):
        return CgroupPlace(2, {"v2": base}, delegated=True)
    # An inner node may not hold processes: move ourselves into a leaf, then enable.
    leaf = base / HOST_LEAF
    try:
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return None
    if _enable(base, available):
        return CgroupPlace(2, {"v2": base}, delegated=True)
    with contextlib.suppress(OSError):  # others share the cgroup: put things back
        (base / "cgroup.procs").write_text(str(os.getpid()))
        leaf.rmdir()
    return None


@dataclass
class CgroupSet:
    """The cgroup directories of one sandbox (one per v1 controller, or one v2 directory)."""

    dirs: dict[str, Path]
    version: int
    # The counters read after every execution, kept open (see ``heldfiles``).
    held: HeldFiles = field(default_factory=HeldFiles, compare=False, repr=False)

    @classmethod
    def create(cls, place: CgroupPlace, *, max_pids: int, memory_bytes: int) -> CgroupSet:
        # The owner's pid in the name lets a later process find and end orphans.
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        if place.version == 2:
            path = place.parents["v2"] / name
            path.mkdir()
            cgroup = cls(dict.fromkeys(("pids", "memory", "cpu", "freezer"), path), 2)
            try:
                (path / "pids.max").write_text(str(max_pids))
                (path / "memory.max").write_text(str(memory_bytes))
            except OSError:
                cgroup.destroy()
                raise
            with contextlib.suppress(OSError):
                (path / "memory.swap.max").write_text("0")
            return cgroup
        dirs = {}
        for controller, parent in place.parents.items():
            path = parent / name
            path.mkdir(parents=True)
            dirs[controller] = path
        cgroup = cls(dirs, 1)
        try:
            (dirs["pids"] / "pids.max").write_text(str(max_pids))
            (dirs["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
        except OSError:
            cgroup.destroy()
            raise
        with contextlib.suppress(OSError):
            (dirs["memory"] / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        return cgroup

    def procs_files(self) -> list[str]:
        """Paths a child writes its pid into (between fork and exec) to join every controller."""
        return sorted({str(path / "cgroup.procs") for path in self.dirs.values()})

    def _read(self, controller: str, name: str, *, held: bool = False) -> str:
        """A file of the sandbox's cgroups ("" when unreadable). ``held``: a counter, kept
        open. Never a list of tasks: cgroup v1 caches those per open file for a second."""
        path = self.dirs.get(controller)
        if path is None:
            return ""
        try:
            return self.held.read(f"{path}/{name}") if held else read_small(path / name)
        except OSError:
            return ""

    def _events(self, controller: str, name: str, keys: tuple[str, ...]) -> bool:
        for line in self._read(controller, name, held=True).splitlines():
            key, _, value = line.partition(" ")
            if key in keys and value.strip() not in ("", "0"):
                return True
        return False

    def pids_limit_hit(self) -> bool:
        return self._events("pids", "pids.events", ("max",))

    def memory_limit_hit(self) -> bool:
        if self.version == 2:
            return self._events("memory", "memory.events", ("oom", "oom_kill"))
        return self._events("memory", "memory.oom_control", ("oom_kill",))

    def cpu_seconds(self) -> float:
        if self.version == 2:
            for line in self._read("cpu", "cpu.stat", held=True).splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
            return 0.0
        text = self._read("cpuacct", "cpuacct.usage", held=True).strip()
        return int(text) / 1e9 if text else 0.0

    def tasks(self) -> int:
        return len(self._read("pids", "cgroup.threads" if self.version == 2 else "tasks").split())

    def pids(self) -> list[int]:
        return [int(p) for p in self._read("pids", "cgroup.procs").split()]

    @property
    def can_freeze(self) -> bool:
        return "freezer" in self.dirs

    def freeze(self) -> None:
        """Stop every task of the sandbox until ``thaw``. Tasks forked while freezing are
        frozen too, so no code of the sandbox runs once this returns."""
        self._set_frozen(True)

    def thaw(self) -> None:
        self._set_frozen(False)

    def _set_frozen(self, frozen: bool) -> None:
        path = self.dirs.get("freezer")
        if path is None:
            return
        with contextlib.suppress(OSError):
            if self.version == 2:
                (path / "cgroup.freeze").write_text("1" if frozen else "0")
            else:
                (path / "freezer.state").write_text("FROZEN" if frozen else "THAWED")

    def kill_all(self) -> None:
        self.thaw()  # a frozen process does not die until it is thawed
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    @classmethod
    def sweep_orphans(cls, place: CgroupPlace) -> int:
        """End sandboxes whose owning process died without cleaning up (a crash, SIGKILL):
        frozen ones would otherwise wait forever. Returns how many were removed."""
        found: dict[str, dict[str, Path]] = {}
        for controller, base in place.parents.items():
            with contextlib.suppress(OSError):
                for entry in base.iterdir():
                    owner, dash, _ = entry.name.partition("-")
                    if not (dash and owner.isdigit() and len(owner) < 10 and entry.is_dir()):
                        continue
                    if not _alive(int(owner)):
                        found.setdefault(entry.name, {})[controller] = entry
        for dirs in found.values():
            if place.version == 2:
                cls(dict.fromkeys(("pids", "memory", "cpu", "freezer"), dirs["v2"]), 2).destroy()
            else:
                cls(dirs, 1).destroy()
        return len(found)

    def destroy(self) -> bool:
        """Kill what is left and remove the directories. True when all were removed."""
        removed = True
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            self.kill_all()
            if not self.pids():
                break
            time.sleep(0.002)
        self.held.close()
        for path in set(self.dirs.values()):
            try:
                path.rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                removed = False
        return removed

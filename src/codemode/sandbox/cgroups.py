"""Per-sandbox control groups: a process cap, a memory cap and CPU accounting.

Used where the machine lets us write cgroups (root, v1 or v2). As root, ``RLIMIT_NPROC`` does
not apply, so the pids controller is what stops a fork bomb; the memory controller counts the
whole sandbox (every process and its tmpfs pages), which per-process rlimits cannot.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CgroupSet", "cgroups_available"]

ROOT = Path("/sys/fs/cgroup")
_PARENT = "codemode"
_V1_CONTROLLERS = ("pids", "memory", "cpuacct", "freezer")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_v2() -> bool:
    return (ROOT / "cgroup.controllers").exists()


def cgroups_available() -> bool:
    """True when we can create pids and memory cgroups here."""
    if os.geteuid() != 0:
        return False
    if _is_v2():
        controllers = (ROOT / "cgroup.controllers").read_text().split()
        return {"pids", "memory"} <= set(controllers) and os.access(ROOT, os.W_OK)
    return all(os.access(ROOT / c, os.W_OK) for c in ("pids", "memory"))


@dataclass
class CgroupSet:
    """The cgroup directories of one sandbox (one per v1 controller, or one v2 directory)."""

    dirs: dict[str, Path]

    @classmethod
    def create(cls, *, max_pids: int, memory_bytes: int) -> CgroupSet:
        # The owner's pid in the name lets a later process find and end orphans.
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        if _is_v2():
            parent = ROOT / _PARENT
            parent.mkdir(exist_ok=True)
            with contextlib.suppress(OSError):
                (parent / "cgroup.subtree_control").write_text("+pids +memory +cpu")
            path = parent / name
            path.mkdir()
            dirs = {"pids": path, "memory": path, "cpu": path, "freezer": path}
            (path / "pids.max").write_text(str(max_pids))
            (path / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):
                (path / "memory.swap.max").write_text("0")
            return cls(dirs)
        dirs = {}
        for controller in _V1_CONTROLLERS:
            base = ROOT / controller
            if not base.is_dir():
                continue
            path = base / _PARENT / name
            path.mkdir(parents=True)
            dirs[controller] = path
        (dirs["pids"] / "pids.max").write_text(str(max_pids))
        (dirs["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
        with contextlib.suppress(OSError):
            (dirs["memory"] / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        return cls(dirs)

    def procs_files(self) -> list[str]:
        """Paths a child writes its pid into (between fork and exec) to join every controller."""
        return sorted({str(path / "cgroup.procs") for path in self.dirs.values()})

    def _read(self, controller: str, name: str) -> str:
        path = self.dirs.get(controller)
        if path is None:
            return ""
        try:
            return (path / name).read_text()
        except OSError:
            return ""

    def pids_limit_hit(self) -> bool:
        for line in self._read("pids", "pids.events").splitlines():
            key, _, value = line.partition(" ")
            if key == "max" and value.strip() != "0":
                return True
        return False

    def memory_limit_hit(self) -> bool:
        if "memory" not in self.dirs:
            return False
        if _is_v2():
            text = self._read("memory", "memory.events")
            keys: tuple[str, ...] = ("oom", "oom_kill")
        else:
            text = self._read("memory", "memory.oom_control")
            keys = ("oom_kill",)
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key in keys and value.strip() not in ("", "0"):
                return True
        return False

    def cpu_seconds(self) -> float:
        if _is_v2():
            for line in self._read("cpu", "cpu.stat").splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
            return 0.0
        text = self._read("cpuacct", "cpuacct.usage").strip()
        return int(text) / 1e9 if text else 0.0

    def pids(self) -> list[int]:
        text = self._read("pids", "cgroup.procs")
        return [int(p) for p in text.split()]

    @property
    def can_freeze(self) -> bool:
        return "freezer" in self.dirs

    def freeze(self) -> None:
        """Stop every process of the sandbox until ``thaw`` (nothing runs between executions)."""
        self._set_frozen(True)

    def thaw(self) -> None:
        self._set_frozen(False)

    def _set_frozen(self, frozen: bool) -> None:
        path = self.dirs.get("freezer")
        if path is None:
            return
        with contextlib.suppress(OSError):
            if _is_v2():
                (path / "cgroup.freeze").write_text("1" if frozen else "0")
            else:
                (path / "freezer.state").write_text("FROZEN" if frozen else "THAWED")

    def kill_all(self) -> None:
        self.thaw()  # a frozen process does not die until it is thawed
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    @classmethod
    def sweep_orphans(cls) -> int:
        """End sandboxes whose owning process died without cleaning up (a crash, SIGKILL):
        frozen ones would otherwise wait forever. Returns how many were removed."""
        found: dict[str, dict[str, Path]] = {}
        bases = [ROOT / _PARENT] if _is_v2() else [ROOT / c / _PARENT for c in _V1_CONTROLLERS]
        for base in bases:
            with contextlib.suppress(OSError):
                for entry in base.iterdir():
                    owner, dash, _ = entry.name.partition("-")
                    if not (dash and owner.isdigit() and len(owner) < 10 and entry.is_dir()):
                        continue
                    if not _alive(int(owner)):
                        found.setdefault(entry.name, {})[entry.parent.parent.name] = entry
        for dirs in found.values():
            cls(dirs).destroy()
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
        for path in set(self.dirs.values()):
            try:
                path.rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                removed = False
        return removed

"""Memory of a process tree as RSS, PSS and USS (MiB), from /proc/PID/smaps_rollup.

RSS counts every shared page once per process, so a sum over 60 sandboxes overstates what they
cost and hides what sharing saves. PSS divides each shared page among the processes that map it
(the sum is what the tree really holds); USS counts only the pages no other process maps (what
freeing that process would give back). Used by peers.py and idle.py; reading another user's
processes needs root (or the same user). ``tree_cpu_s`` tells when a tree has gone quiet.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class TreeMemory:
    """A process tree's memory in MiB and how many processes it has."""

    rss: float
    pss: float
    uss: float
    processes: int

    def text(self) -> str:
        return (
            f"RSS {self.rss:.0f} / PSS {self.pss:.0f} / USS {self.uss:.0f} MiB, "
            f"{self.processes} processes"
        )


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it."""
    parents: dict[int, int] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = {pid}, [pid]
    while frontier:
        current = frontier.pop()
        children = [child for child, parent in parents.items() if parent == current]
        tree.update(children)
        frontier += children
    return tree


def rollup_kib(pid: int) -> dict[str, int]:
    """The kB fields of ``pid``'s smaps_rollup ({} once the process is gone)."""
    fields: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in (PROC / str(pid) / "smaps_rollup").read_text().splitlines()[1:]:
            name, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                fields[name] = int(parts[0])
    return fields


def tree_memory(pid: int) -> TreeMemory:
    """RSS, PSS and USS of ``pid`` and all its descendants, summed."""
    rss = pss = uss = 0
    members = descendants(pid)
    for member in members:
        fields = rollup_kib(member)
        rss += fields.get("Rss", 0)
        pss += fields.get("Pss", 0)
        uss += fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    return TreeMemory(rss / 1024, pss / 1024, uss / 1024, len(members))


if __name__ == "__main__":
    import os
    import sys

    print(tree_memory(int(sys.argv[1]) if len(sys.argv) > 1 else os.getpid()).text())


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the live processes of ``pid``'s tree have used so far."""
    ticks = 0
    for member in descendants(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (PROC / str(member) / "stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
    return ticks / CLOCK_TICKS

"""Serve a chatty execution from the guest's CPU.

A tool call's round trip between two cores costs about twice as much as on one (measured on
this project's 2-core machines), so after a few calls the runner's thread and the guest are
pinned to the core the guest is on, and unpinned when the execution ends. A quiet execution
is never pinned: large transfers gain from two cores.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["CpuPinning"]


class CpuPinning:
    def __init__(self) -> None:
        self._host_from: set[int] | None = None
        self._guest_from: set[int] | None = None

    def pin(self, guest_pid: int | None) -> None:
        if guest_pid is None or self._host_from is not None:
            return
        if not hasattr(os, "sched_setaffinity"):
            return
        try:
            stat = Path(f"/proc/{guest_pid}/stat").read_text()
            cpu = int(stat.rsplit(")", 1)[1].split()[36])
            allowed = os.sched_getaffinity(0)
            guest_allowed = os.sched_getaffinity(guest_pid)
            if cpu in allowed and cpu in guest_allowed and len(allowed) > 1:
                # Both sides, or the load balancer moves the guest to the idle core.
                os.sched_setaffinity(0, {cpu})
                os.sched_setaffinity(guest_pid, {cpu})
                self._host_from = allowed
                self._guest_from = guest_allowed
        except (OSError, ValueError, IndexError):
            return

    def unpin(self, guest_pid: int | None, *, guest_alive: bool) -> None:
        if self._host_from is None:
            return
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, self._host_from)
        if guest_pid is not None and self._guest_from and guest_alive:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(guest_pid, self._guest_from)
        self._host_from = None

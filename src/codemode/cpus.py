"""The CPUs a thread may use, taken back by a thread that a pinned one started.

A thread inherits the CPU affinity of the thread that starts it. The sandbox's bridge thread
pins itself to its guest's CPU during a chatty execution (``sandbox.affinity``): a pool that
starts a thread from it then (the tool threads, the audit writer, the digest threads) would
keep that one CPU for good, and run every later session's work there.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["process_cpus", "take_process_cpus"]


def process_cpus() -> frozenset[int] | None:
    """The CPUs of the process's main thread (None where affinity is not known)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    try:
        return frozenset(os.sched_getaffinity(os.getpid()))
    except OSError:
        return None


def take_process_cpus() -> None:
    """Give the calling thread the CPUs of the process's main thread (a thread pool's
    ``initializer``; a new thread's first step)."""
    cpus = process_cpus()
    if cpus:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, cpus)

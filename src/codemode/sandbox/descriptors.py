"""Let this process open as many files as its hard limit allows.

Each sandbox holds about a dozen descriptors on the host: its bridge, output pipes and pidfd,
and the /proc and cgroup files read again after every execution. Under the common soft limit of
1,024 a gateway with many sessions would run out; raising the soft limit as far as the hard
one needs no privilege.
"""

from __future__ import annotations

import resource

__all__ = ["WANTED_OPEN_FILES", "raise_open_files_limit"]

WANTED_OPEN_FILES = 65536


def raise_open_files_limit(wanted: int = WANTED_OPEN_FILES) -> int:
    """Raise the soft RLIMIT_NOFILE to ``wanted`` (or the hard limit, if lower); never lower
    it. Returns the soft limit in force afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError):
            return soft
        return target
    return soft

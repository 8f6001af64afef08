"""Small /proc and cgroup files kept open and read again in place.

Between two executions the host reads the same few files each time: the guest's syscall, stat
and children, its cgroups' counters. Opening and closing each one every time was most of the
host's system calls on the warm path. A file kept open is read again with one ``pread`` at
offset 0: these are seq files, and a read at 0 renders them afresh.

A /proc file opened for a process keeps reading that process, never one that later gets its
pid: once the process has ended it reads as an error.
"""

from __future__ import annotations

import contextlib
import os
import threading

from codemode.sandbox.proctree import read_small

__all__ = ["HeldFiles"]

# Larger than any file held here; a file that fills it is read whole the ordinary way.
_CHUNK = 65536


class HeldFiles:
    """Files opened on first read and kept open until ``close``. Safe from any thread; once
    closed, a read opens the path afresh (as ``read_small`` does)."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        self._lock = threading.Lock()
        self._closed = False

    def read(self, path: str) -> str:
        """The file's text now. Raises OSError like ``read_small``."""
        with self._lock:  # so that ``close`` never frees a descriptor while it is read
            if self._closed:
                return read_small(path)
            fd = self._fds.get(path)
            if fd is None:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                self._fds[path] = fd
            data = os.pread(fd, _CHUNK, 0)
        if len(data) >= _CHUNK:
            return read_small(path)
        return data.decode("utf-8", "replace")

    def close(self) -> None:
        with self._lock:
            fds, self._fds = self._fds, {}
            self._closed = True
        for fd in fds.values():
            os.close(fd)

    def __len__(self) -> int:
        return len(self._fds)

    def __del__(self) -> None:
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)

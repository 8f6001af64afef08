"""Small /proc and cgroup files (and mounts' usage) kept open and read again in place.

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

from codemode.sandbox.proctree import read_at, read_small

__all__ = ["HeldFiles"]

_CHUNK = 65536
# A read shorter than this is the whole file: a seq file fills at least a page per read
# unless it has reached its end, and no record of the files held here is this long.
_WHOLE_BELOW = 2048


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
            if len(data) >= _WHOLE_BELOW:
                # A seq file returns about a page per read, however much is asked for: read
                # on until its end (a file this long is rare here: many sockets or children).
                parts = [data]
                while more := os.pread(fd, _CHUNK, sum(map(len, parts))):
                    parts.append(more)
                data = b"".join(parts)
        return data.decode("utf-8", "replace")

    def read_at(self, path: str, offset: int, size: int) -> bytes:
        """``size`` bytes (fewer at the end) at ``offset`` of the file at ``path``, through a
        descriptor kept open: a process's memory, /proc/<pid>/mem, is read at an address."""
        with self._lock:
            if self._closed:
                return read_at(path, offset, size)
            held = self._fds.get(path)
            if held is None:
                held = self._fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            return os.pread(held, size, offset)

    def statvfs(self, path: str) -> os.statvfs_result:
        """The filesystem at ``path`` now, through a descriptor kept open (``O_PATH``: no
        read access needed, and no path walked again)."""
        with self._lock:
            if self._closed:
                return os.statvfs(path)
            key = f"statvfs:{path}"
            fd = self._fds.get(key)
            if fd is None:
                fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                self._fds[key] = fd
            return os.fstatvfs(fd)

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

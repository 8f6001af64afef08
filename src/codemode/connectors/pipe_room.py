"""Room in the pipes to a stdio MCP server, grown once a large message passes.

A Linux pipe holds 64 KiB. A megabyte request then crosses in 16 pieces and its 2 MB answer (the
text and the structured copy) in 32, each a wake-up of the other side and a wait for a CPU.
With 1 MiB of room each crosses in one or two. On the 1 MB echo of ``benchmarks/peers.py``
(P6), two gateways side by side with calls interleaved, the fastest of 80 echoes went from
37.7 ms to 35.0-35.2 ms; the medians moved less than this machine's noise.

Only the pipes of a server that moves large messages grow: the kernel counts a pipe's room
against its user's soft limit (``/proc/sys/fs/pipe-user-pages-soft``, 64 MiB by default), and a
user past it gets small pipes everywhere (sandboxes' included). So a pipe grows the first time a
message larger than its room passes, at most ``MAX_GROWN`` pipes of the process at once, and
where the kernel says no (a user at the limit) the pipe keeps its room: nothing else changes.
"""

from __future__ import annotations

import fcntl
import logging
import threading

__all__ = ["GROWN_BYTES", "MAX_GROWN", "PipeRoom", "grown_pipes"]

log = logging.getLogger(__name__)

#: The room a pipe grows to: ``/proc/sys/fs/pipe-max-size``'s default, what any user may ask.
GROWN_BYTES = 1 << 20
#: Pipes grown at once in this process: 16 MiB, a quarter of the default soft limit.
MAX_GROWN = 16

#: A new pipe's room on Linux: a message this large may not fit.
_NEW_PIPE_ROOM = 1 << 16

# Linux only (Python 3.10+ names them): elsewhere pipes keep their room.
_F_SETPIPE_SZ: int | None = getattr(fcntl, "F_SETPIPE_SZ", None)
_F_GETPIPE_SZ: int | None = getattr(fcntl, "F_GETPIPE_SZ", None)


class _Places:
    """How many pipes of this process are grown, against ``MAX_GROWN``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.taken = 0

    def take(self) -> bool:
        with self._lock:
            if self.taken >= MAX_GROWN:
                return False
            self.taken += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self.taken -= 1


_places = _Places()


class PipeRoom:
    """One pipe's room (``fd``: this process's end; None where it is not known)."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd
        self._room: int | None = None
        # It grows once at most; at the cap, the pipe stays as it is for good.
        self._asked = fd is None or _F_SETPIPE_SZ is None
        self._holds = False  # one of the ``MAX_GROWN``

    @property
    def room(self) -> int | None:
        """The pipe's room in bytes, once looked up (None before, or where unknown)."""
        return self._room

    def passing(self, size: int) -> None:
        """A message (or a read) of ``size`` bytes passes: grow the pipe if it fills it."""
        if self._asked or size < _NEW_PIPE_ROOM:
            return
        assert self._fd is not None and _F_GETPIPE_SZ is not None and _F_SETPIPE_SZ is not None
        try:
            self._room = fcntl.fcntl(self._fd, _F_GETPIPE_SZ)
        except OSError:
            self._asked = True  # not a pipe (a test's file), or closed already
            return
        if self._room > size:
            return  # it fits: a later, larger message may still grow the pipe
        self._asked = True
        if self._room >= GROWN_BYTES:
            return
        if not _places.take():
            return
        self._holds = True
        try:
            self._room = fcntl.fcntl(self._fd, _F_SETPIPE_SZ, GROWN_BYTES)
        except OSError as error:  # EPERM: the user is at its limit; EBADF: closed meanwhile
            log.debug("a stdio server's pipe stays at %d bytes: %s", self._room, error)
            self.release()

    def release(self) -> None:
        """The pipe is closed (or did not grow): it no longer counts as grown."""
        if self._holds:
            self._holds = False
            _places.give_back()


def grown_pipes() -> int:
    """How many pipes of this process are grown now."""
    return _places.taken

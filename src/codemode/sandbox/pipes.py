"""Reading the guest's stdout and stderr pipes: what they hold, in one read of that size.

The pipes are made 1 MiB deep. Reading one with a 1 MiB request allocates 1 MiB for the two
bytes a warm ``print`` wrote (about 7 us, more than the rest of the read), and reading again
until it fails costs an exception each time. So the runner asks the kernel how much the pipe
holds (FIONREAD) and reads exactly that.
"""

from __future__ import annotations

import fcntl
import os
import sys
import termios

__all__ = ["read_pipe"]

# Where the count cannot be had (not a pipe): read in chunks of this size until one is short.
_CHUNK = 1 << 16


def read_pipe(fd: int, scratch: bytearray, *, ready: bool = True) -> bytes | None:
    """What the non-blocking pipe ``fd`` holds now; b"" at its end; None when it holds
    nothing. ``ready``: the selector said it is readable, so a pipe that holds nothing is at
    its end (only a read tells); otherwise a pipe that holds nothing is left alone.
    ``scratch``: four bytes for the count."""
    try:
        fcntl.ioctl(fd, termios.FIONREAD, scratch)
        waiting = int.from_bytes(scratch, sys.byteorder)
    except OSError:
        waiting = -1  # unknown: chunks, until one comes back short
    if waiting == 0 and not ready:
        return None
    size = waiting if waiting > 0 else (1 if waiting == 0 else _CHUNK)
    parts: list[bytes] = []
    while True:
        try:
            data = os.read(fd, size)
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            data = b""
        if not data:
            if not parts:
                return b""
            break
        parts.append(data)
        if waiting >= 0 or len(data) < size:
            break
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else b"".join(parts)

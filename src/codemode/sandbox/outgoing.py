"""Frames from the host to the guest, each sent within the execution's deadline.

A small frame goes out in one send. A large one goes piece by piece, never copied into one
buffer; a large ASCII string a slice at a time, encoded as it goes, so a 10 MB value costs
no 10 MB copy (see ``codemode.bridge.frames.encode_frame_parts``).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from codemode.bridge.frames import encode_frame_parts, slice_chars

__all__ = ["send_frame"]

# A frame's body up to this size is sent with its length prefix in one send (one copy).
_JOINED_BYTES = 1 << 16
# Waits until the socket may take more or the time is up, doing what must go on meanwhile.
Wait = Callable[[float], None]


def send_frame(
    sock: socket.socket,
    frame: dict[str, Any],
    deadline: float,
    wait: Wait,
    blocked: Callable[[], None] | None = None,
) -> bool:
    """Send ``frame`` on the non-blocking ``sock``; False if the guest did not take it all
    by ``deadline``. ``blocked`` is called before each wait for the guest to read."""
    pieces = encode_frame_parts(frame)
    if len(pieces) == 2 and len(pieces[1]) <= _JOINED_BYTES:
        prefix, body = pieces
        assert isinstance(prefix, bytes) and isinstance(body, bytes)
        return _send_bytes(sock, prefix + body, deadline, wait, blocked)
    step = slice_chars()
    # The small pieces between large ones (the prefix, keys, a string's head) go out joined:
    # each send wakes a waiting guest, to read a few bytes.
    run: list[bytes] = []
    for piece in pieces:
        if not isinstance(piece, str) and len(piece) <= _JOINED_BYTES:
            run.append(piece)
            continue
        if run and not _send_bytes(sock, b"".join(run), deadline, wait, blocked):
            return False
        run = []
        if isinstance(piece, str):
            for start in range(0, len(piece), step):
                data = piece[start : start + step].encode("ascii")
                if not _send_bytes(sock, data, deadline, wait, blocked):
                    return False
        elif not _send_bytes(sock, piece, deadline, wait, blocked):
            return False
    return not run or _send_bytes(sock, b"".join(run), deadline, wait, blocked)


def _send_bytes(
    sock: socket.socket,
    data: bytes,
    deadline: float,
    wait: Wait,
    blocked: Callable[[], None] | None,
) -> bool:
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view) :]
        except (BlockingIOError, InterruptedError):
            if blocked is not None:
                blocked()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            wait(remaining)
        except OSError:
            return False
    return True

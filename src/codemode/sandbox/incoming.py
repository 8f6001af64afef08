"""Frames from the guest, read off the non-blocking bridge as they arrive.

A large frame under way is received straight into its buffer (no copies); the rest into one
reused buffer (``recv(n)`` would allocate n bytes every time).
"""

from __future__ import annotations

import socket
from typing import Any

from codemode.bridge.frames import FrameDecoder, MalformedFrame

__all__ = ["BridgeReader"]

_RECV_CHUNK = 1 << 16


class BridgeReader:
    """Reads the host's end of the bridge; ``ended`` once the guest's end is gone."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.decoder = FrameDecoder()
        self.ended = False
        self._chunk = memoryview(bytearray(_RECV_CHUNK))

    def read(self, *, to_the_end: bool = False) -> list[dict[str, Any] | MalformedFrame]:
        """The frames complete now. ``to_the_end``: read until the socket is empty or ends,
        not only until it has no more for now."""
        frames: list[dict[str, Any] | MalformedFrame] = []
        decoder = self.decoder
        sock = self.sock
        while True:
            pending = decoder.pending()
            into = self._chunk if pending is None else pending
            try:
                count = sock.recv_into(into)
            except (BlockingIOError, InterruptedError):
                return frames
            except OSError:
                count = 0
            if not count:
                self.ended = True
                return frames
            if pending is not None:
                frames += decoder.filled(count)
            else:  # decoded before the next receive reuses the buffer
                frames += decoder.feed(memoryview(into)[:count])
            if count < len(into) and not to_the_end:
                # The socket is empty: asking again would only fail. The selector is
                # level-triggered, so whatever arrives later (its end too) wakes the loop.
                return frames

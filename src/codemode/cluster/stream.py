"""The stream between a worker node and the gateway: one TCP connection, several channels.

A sandbox's bridge socket and its stdout and stderr pipes are carried over one ordered stream,
so output the guest wrote before it said "done" always reaches the gateway before "done" does
(separate connections could deliver them in any order). Each chunk is a 1-byte channel, a
4-byte big-endian length and the bytes. The guest never writes these headers: the worker wraps
whatever the guest writes, so the guest cannot forge a channel. The bridge frames inside
channel ``B`` are the ordinary length-prefixed MessagePack frames, decoded (with their size
caps and late-frame checks) only on the gateway, exactly as for a local sandbox.

Channel ``C`` carries the gateway's questions about the guest (CPU, usage, idle, the workspace
listing) and the worker's answers, as small MessagePack maps: ``{"id": n, "ask": name}`` and
``{"id": n, "value": v}``. Asked on the stream, a warm execution needs no round trip through Ray.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from typing import Any

import msgpack

__all__ = [
    "BRIDGE",
    "CONTROL",
    "EXITED",
    "MAX_CHUNK",
    "MAX_CONTROL",
    "STDERR",
    "STDOUT",
    "MuxReader",
    "MuxWriter",
    "decode_control",
    "encode_control",
    "tune",
]

BRIDGE = b"B"
STDOUT = b"O"
STDERR = b"E"
# The guest's bridge socket closed (it exited or was killed): sent last by the worker. A stream
# that ends without it means the worker node or the network to it was lost.
EXITED = b"X"
CONTROL = b"C"
_CHANNELS = frozenset((BRIDGE, STDOUT, STDERR, EXITED, CONTROL))
MAX_CHUNK = 1 << 20
# A workspace listing (5,000 entries at most) is one control answer.
MAX_CONTROL = 32 << 20
_HEADER = struct.Struct(">cI")
_BUFFER_BYTES = 4 * 1024 * 1024
_JOINED_BYTES = 64 * 1024


def tune(sock: socket.socket, *, dead_peer_s: int | None = None) -> None:
    """No Nagle delay (every bridge frame is latency-bound), large buffers, and with
    ``dead_peer_s`` a bound on how long a silent or unreachable peer keeps the stream open."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, option, _BUFFER_BYTES)
    if dead_peer_s is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, max(dead_peer_s - 1, 1))
            # Unacknowledged data (a node that vanished mid-send) also gives up in time.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, dead_peer_s * 1000)


def encode_control(message: dict[str, Any]) -> bytes:
    return msgpack.packb(message, use_bin_type=True)


def decode_control(data: bytes) -> dict[str, Any] | None:
    """A control message, or None for anything that is not a map."""
    try:
        message = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
        return None
    return message if isinstance(message, dict) else None


class MuxWriter:
    """Sends chunks; safe to call from several threads."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._lock = threading.Lock()

    def send(self, channel: bytes, data: bytes | memoryview = b"") -> bool:
        """False when the stream is gone. A control message goes as one chunk."""
        view = memoryview(data)
        piece_bytes = MAX_CONTROL if channel == CONTROL else MAX_CHUNK
        try:
            with self._lock:
                if not view:
                    self.sock.sendall(_HEADER.pack(channel, 0))
                while view:
                    piece = view[:piece_bytes]
                    header = _HEADER.pack(channel, len(piece))
                    if len(piece) <= _JOINED_BYTES:  # one segment for the latency-bound ones
                        self.sock.sendall(header + piece)
                    else:
                        self.sock.sendall(header)
                        self.sock.sendall(piece)
                    view = view[piece_bytes:]
        except OSError:
            return False
        return True


class MuxReader:
    """Reads chunks from a blocking socket. ``read`` returns None at the end of the stream or
    on a broken one (an unknown channel or an oversized chunk ends it too)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray()

    def _fill(self, size: int) -> bool:
        while len(self._buffer) < size:
            try:
                data = self.sock.recv(max(size - len(self._buffer), 1 << 16))
            except OSError:
                return False
            if not data:
                return False
            self._buffer += data
        return True

    def read(self) -> tuple[bytes, bytes] | None:
        if not self._fill(_HEADER.size):
            return None
        channel, length = _HEADER.unpack_from(self._buffer)
        cap = MAX_CONTROL if channel == CONTROL else MAX_CHUNK
        if channel not in _CHANNELS or length > cap:
            return None
        if not self._fill(_HEADER.size + length):
            return None
        data = bytes(self._buffer[_HEADER.size : _HEADER.size + length])
        del self._buffer[: _HEADER.size + length]
        return channel, data

"""Bridge frames on the host side: 4-byte big-endian length + MessagePack body.

The guest (``codemode.sandbox.guest.wire``) writes the same format with the standard library.
Everything from the guest is untrusted: sizes are capped before allocation, nesting is capped,
only plain data types decode (no extension types, nothing is unpickled), and a bad frame is an
error value, never an exception that escapes the reader.
"""

from __future__ import annotations

import mmap
import struct
import threading
from dataclasses import dataclass
from typing import Any

import msgpack

from codemode.errors import BridgeProtocolError
from codemode.heap import heap_blocks_up_to, release_on_trim

__all__ = [
    "MAX_DEPTH",
    "SLICE_CHARS",
    "FrameDecoder",
    "MalformedFrame",
    "drop_spare_buffer",
    "encode_frame",
    "encode_frame_parts",
    "is_awaitable_call",
    "is_done",
    "slice_chars",
]

_LEN = struct.Struct(">I")
MAX_DEPTH = 64


_LARGE = 1 << 16


def _pack(obj: Any) -> bytes:
    packed: bytes = msgpack.packb(obj, use_bin_type=True, datetime=False)
    return packed


# A large ASCII string goes out in slices of this size, each encoded as it is sent: small
# enough to come from the heap's free memory every time (not from fresh pages).
SLICE_CHARS = 1 << 16
# The slices where the heap serves blocks of their size itself (``slice_chars``).
KEPT_SLICE_CHARS = 1 << 20


def slice_chars() -> int:
    """How many characters of a large ASCII string are encoded and sent at a time. Where the
    heap serves blocks of a slice and its copy (``heap.keep_large_blocks_in_heap``, as the
    gateway sets it), 1 MiB: a sixteenth of the slices and of the sends, a 10 MB reply 1.5-2
    ms sooner; elsewhere 64 KiB, which the heap's free memory holds (a 1 MiB block would be
    mapped fresh for each slice, a page fault a page)."""
    return KEPT_SLICE_CHARS if heap_blocks_up_to() >= 2 * KEPT_SLICE_CHARS else SLICE_CHARS


def encode_frame(obj: Any) -> bytes:
    return b"".join(
        piece.encode("ascii") if isinstance(piece, str) else piece
        for piece in encode_frame_parts(obj)
    )


def encode_frame_parts(obj: Any) -> list[bytes | str]:
    """The frame as pieces to send one after the other (the length prefix first). A large
    string at the top of a map (a reply's ``value``) is not copied into the body: msgpack
    would grow its buffer for it and then copy the whole body out. If it is ASCII (its
    length is then its size in bytes) it stays a ``str`` piece, for the sender to encode a
    slice at a time (``slice_chars``); else it is encoded on its own."""
    if not isinstance(obj, dict) or not any(
        isinstance(value, str) and len(value) > _LARGE for value in obj.values()
    ):
        body = _pack(obj)
        return [_LEN.pack(len(body)), body]
    size = len(obj)
    parts: list[bytes | str] = [bytes([0x80 | size]) if size < 16 else b"\xdf" + _LEN.pack(size)]
    for key, value in obj.items():
        parts.append(_pack(key))
        if isinstance(value, str) and len(value) > _LARGE:
            text = value if value.isascii() else value.encode("utf-8")
            parts += [b"\xdb" + _LEN.pack(len(text)), text]  # str 32
        else:
            parts.append(_pack(value))
    return [_LEN.pack(sum(map(len, parts))), *parts]


@dataclass(frozen=True, slots=True)
class MalformedFrame:
    """A frame that could not be decoded; ``reason`` is safe to send back to the guest."""

    reason: str


def _too_deep(value: Any, limit: int) -> bool:
    """Whether anything in ``value`` lies deeper than ``limit`` (its members are at depth 1).
    Walks one level at a time and only into containers: a call's frame takes two steps. A
    decoded frame holds only exact dicts and lists, so their types are compared, not tested
    with ``isinstance`` (10,000 records: 8.5 ms instead of 28)."""
    level: list[Any] = [value]
    depth = 0
    while level:
        if depth >= limit:
            return any(level)  # a container here that holds anything
        inner: list[Any] = []
        append = inner.append
        for item in level:
            for member in item.values() if type(item) is dict else item:
                kind = type(member)
                if kind is dict or kind is list:
                    append(member)
        level = inner
        depth += 1
    return False


class FrameDecoder:
    """Incremental decoder: ``feed`` bytes, get complete frames (or ``MalformedFrame``s).

    An oversized frame is reported once and its body skipped as it arrives, so the stream stays
    in sync without buffering it.
    """

    def __init__(self, max_frame_bytes: int = 64 * 1024 * 1024) -> None:
        if max_frame_bytes <= 0:
            raise BridgeProtocolError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._skip = 0
        # A large frame's body goes straight into a buffer of its size (allocated once its
        # size passed the cap), filled by ``feed`` or by the reader itself (``pending``).
        self._big: mmap.mmap | None = None
        self._size = 0  # of the frame ``_big`` receives (the buffer may be larger)
        self._have = 0

    def pending(self) -> memoryview | None:
        """The unfilled rest of a large frame's buffer, to receive into (then ``filled``)."""
        if self._big is None:
            return None
        return memoryview(self._big)[self._have : self._size]

    def filled(self, count: int) -> list[dict[str, Any] | MalformedFrame]:
        """``count`` bytes were received into ``pending()``: the frame, once complete."""
        assert self._big is not None and 0 <= count <= self._size - self._have
        self._have += count
        if self._have < self._size:
            return []
        buffer, self._big, self._have = self._big, None, 0
        with memoryview(buffer) as whole, whole[: self._size] as body:
            frame = self._decode(body)  # its values are copies: the buffer is free again
        _SPARE.give_back(buffer)
        return [frame]

    def feed(self, data: bytes | bytearray | memoryview) -> list[dict[str, Any] | MalformedFrame]:
        out: list[dict[str, Any] | MalformedFrame] = []
        view = memoryview(data)
        if self._skip:
            taken = min(self._skip, len(view))
            self._skip -= taken
            view = view[taken:]
        if self._big is not None:
            taken = min(self._size - self._have, len(view))
            self._big[self._have : self._have + taken] = view[:taken]
            out += self.filled(taken)
            view = view[taken:]
            if self._big is not None:
                return out
        # Complete frames are decoded where they arrived; only a partial one is kept.
        buffered = bool(self._buffer)
        if buffered:
            self._buffer += view
        buf: bytearray | memoryview = self._buffer if buffered else view
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _LEN.unpack_from(buf, pos)
            if size > self.max_frame_bytes:
                out.append(
                    MalformedFrame(
                        f"frame of {size} bytes exceeds the {self.max_frame_bytes}-byte limit"
                    )
                )
                available = len(buf) - pos - 4
                taken = min(size, available)
                self._skip = size - taken
                pos += 4 + taken
                continue
            available = len(buf) - pos - 4
            if available < size:
                if size > 65536:
                    self._big, self._size = _SPARE.take(size), size
                    self._big[:available] = buf[pos + 4 :]
                    self._have = available
                    pos = len(buf)
                break
            out.append(self._decode(memoryview(buf)[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if buffered:
            del self._buffer[:pos]
        elif pos < len(view):
            self._buffer += view[pos:]
        return out

    def _decode(
        self, body: bytes | bytearray | memoryview | mmap.mmap
    ) -> dict[str, Any] | MalformedFrame:
        try:
            value = msgpack.unpackb(
                body,
                raw=False,
                strict_map_key=True,
                use_list=True,
                ext_hook=_refuse_ext,
                timestamp=0,
            )
        except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError) as error:
            return MalformedFrame(f"undecodable frame: {type(error).__name__}: {error}"[:300])
        except Exception as error:  # noqa: BLE001 - hostile bytes must never crash the host
            return MalformedFrame(f"undecodable frame: {type(error).__name__}"[:300])
        if not isinstance(value, dict):
            return MalformedFrame("a frame must be a map")
        if _too_deep(value, MAX_DEPTH):
            return MalformedFrame(f"frame nested deeper than {MAX_DEPTH} levels")
        return value


# madvise(MADV_POPULATE_WRITE), Linux 5.14: every page faulted in, writable, at once.
_POPULATE_WRITE = 23
# From this size on a buffer can hold transparent huge pages (2 MiB each).
_HUGE_FROM = 2 << 20


def _frame_buffer(size: int) -> mmap.mmap:
    """Memory for a large frame's body. Mapped with its pages in place (one fault for all of
    them, not one per page as the receive copies in) and with no zero-fill pass, which cost
    more than the copy; unmapped when the last reference to it goes (the largest recent one
    is kept for the next large frame: ``_SpareBuffer``), so none of it stays with the heap.
    From 2 MiB on, in huge pages where the kernel has them for the asking
    (``transparent_hugepage`` "madvise" or "always"): 10 MB mapped in 0.7 ms instead of 3.2,
    its 2,442 small pages each faulted in and zeroed one by one."""
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    if size >= _HUGE_FROM and hasattr(mmap, "MADV_HUGEPAGE"):
        buffer = mmap.mmap(-1, size, flags=flags)
        try:
            buffer.madvise(mmap.MADV_HUGEPAGE)
            buffer.madvise(_POPULATE_WRITE)
            return buffer
        except OSError:  # an older kernel: as below
            buffer.close()
    return mmap.mmap(-1, size, flags=flags | getattr(mmap, "MAP_POPULATE", 0))


#: The largest buffer kept for the next large frame (``_SpareBuffer``).
SPARE_MAX = 16 << 20


class _SpareBuffer:
    """The buffer of the last large frame, kept for the next one: its pages are in place (a
    MiB of new ones cost the gateway about half a millisecond, as much as receiving into
    them). One at a time, the largest, up to ``SPARE_MAX``; taken by one frame at a time."""

    def __init__(self) -> None:
        self.buffer: mmap.mmap | None = None
        self._lock = threading.Lock()

    def take(self, size: int) -> mmap.mmap:
        """A buffer of ``size`` bytes or more: the kept one if it is big enough, else new."""
        with self._lock:
            buffer = self.buffer
            if buffer is not None and len(buffer) >= size:
                self.buffer = None
                return buffer
        return _frame_buffer(size)

    def give_back(self, buffer: mmap.mmap) -> None:
        if len(buffer) > SPARE_MAX:
            return
        with self._lock:
            if self.buffer is None or len(self.buffer) < len(buffer):
                self.buffer = buffer

    def drop(self) -> None:
        with self._lock:
            self.buffer = None


_SPARE = _SpareBuffer()


def drop_spare_buffer() -> None:
    """Let go of the buffer kept for the next large frame (the gateway trims its memory)."""
    _SPARE.drop()


release_on_trim(drop_spare_buffer)


def _refuse_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"extension type {code} is not allowed")


def is_awaitable_call(frame: dict[str, Any] | MalformedFrame) -> bool:
    """A tool call the guest's code awaits (answered on a worker, not in turn)."""
    return isinstance(frame, dict) and frame.get("op") == "call" and frame.get("async") is True


def is_done(frame: dict[str, Any] | MalformedFrame) -> bool:
    """The guest's end of an execution."""
    return isinstance(frame, dict) and frame.get("op") == "done"

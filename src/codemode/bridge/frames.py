"""Bridge frames on the host side: 4-byte big-endian length + MessagePack body.

The guest (``codemode.sandbox.guest.wire``) writes the same format with the standard library.
Everything from the guest is untrusted: sizes are capped before allocation, nesting is capped,
only plain data types decode (no extension types, nothing is unpickled), and a bad frame is an
error value, never an exception that escapes the reader.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import msgpack

from codemode.errors import BridgeProtocolError

__all__ = ["MAX_DEPTH", "FrameDecoder", "MalformedFrame", "encode_frame"]

_LEN = struct.Struct(">I")
MAX_DEPTH = 64


def encode_frame(obj: Any) -> bytes:
    body: bytes = msgpack.packb(obj, use_bin_type=True, datetime=False)
    return _LEN.pack(len(body)) + body


@dataclass(frozen=True, slots=True)
class MalformedFrame:
    """A frame that could not be decoded; ``reason`` is safe to send back to the guest."""

    reason: str


def _too_deep(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
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
        # A large frame's body is collected as chunks and joined once (no quadratic copies).
        self._need = 0
        self._chunks: list[bytes] = []
        self._have = 0

    def feed(self, data: bytes) -> list[dict[str, Any] | MalformedFrame]:
        out: list[dict[str, Any] | MalformedFrame] = []
        view = memoryview(data)
        if self._skip:
            taken = min(self._skip, len(view))
            self._skip -= taken
            view = view[taken:]
        if self._need:
            taken = min(self._need - self._have, len(view))
            self._chunks.append(bytes(view[:taken]))
            self._have += taken
            view = view[taken:]
            if self._have < self._need:
                return out
            body = b"".join(self._chunks)
            self._need, self._have, self._chunks = 0, 0, []
            out.append(self._decode(body))
        self._buffer += view
        buf = self._buffer
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
                    self._need = size
                    self._chunks = [bytes(buf[pos + 4 :])]
                    self._have = available
                    pos = len(buf)
                break
            out.append(self._decode(memoryview(buf)[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        del buf[:pos]
        return out

    def _decode(self, body: bytes | memoryview) -> dict[str, Any] | MalformedFrame:
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


def _refuse_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"extension type {code} is not allowed")

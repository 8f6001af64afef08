"""Frames the host sends to the guest: the bytes on the wire, partial sends, the deadline."""

from __future__ import annotations

import time
from typing import Any

import pytest

from codemode.bridge import frames
from codemode.bridge.frames import SLICE_CHARS, FrameDecoder, encode_frame
from codemode.sandbox.outgoing import send_frame


class _SlowSocket:
    """Takes at most ``take`` bytes a send, and every other send none (the guest is busy)."""

    def __init__(self, take: int, *, stalled: bool = False) -> None:
        self.take = take
        self.stalled = stalled
        self.wire = bytearray()
        self.sends = 0

    def send(self, data: memoryview) -> int:
        self.sends += 1
        if self.stalled or self.sends % 2 == 0:
            raise BlockingIOError
        self.wire += data[: self.take]
        return min(self.take, len(data))


FRAMES: dict[str, dict[str, Any]] = {
    "small": {"op": "reply", "id": 1, "ok": True, "value": 6},
    "large ASCII value": {"op": "reply", "id": 2, "ok": True, "value": "x" * (3 * SLICE_CHARS + 5)},
    "large non-ASCII value": {"op": "reply", "id": 3, "ok": True, "value": "é" * 100_000},
    "large, with no large string at the top": {"op": "reply", "id": 4, "value": ["y" * 999] * 99},
}


@pytest.mark.parametrize("name", FRAMES)
def test_the_wire_holds_the_encoded_frame(name: str) -> None:
    frame = FRAMES[name]
    sock = _SlowSocket(take=40_000)
    waits: list[float] = []
    assert send_frame(sock, frame, time.monotonic() + 60, waits.append)  # type: ignore[arg-type]
    assert bytes(sock.wire) == encode_frame(frame)
    assert FrameDecoder().feed(sock.wire) == [frame]
    assert len(waits) == sock.sends // 2  # each refused send waited once


def test_a_guest_that_never_reads_fails_the_send_at_the_deadline() -> None:
    blocked: list[None] = []
    waits: list[float] = []
    sock = _SlowSocket(take=0, stalled=True)
    deadline = time.monotonic() - 1  # the execution's time is up
    sent = send_frame(sock, FRAMES["small"], deadline, waits.append, lambda: blocked.append(None))  # type: ignore[arg-type]
    assert sent is False
    assert blocked == [None]  # told once, before it would have waited
    assert waits == []


class _RecordingSocket:
    """Takes every send whole and keeps the size of each."""

    def __init__(self) -> None:
        self.wire = bytearray()
        self.sizes: list[int] = []

    def send(self, data: memoryview) -> int:
        self.wire += data
        self.sizes.append(len(data))
        return len(data)


@pytest.mark.parametrize(("heap_blocks", "slice_size"), [(0, 1 << 16), (4 << 20, 1 << 20)])
def test_a_large_ascii_value_goes_out_in_slices_the_heap_serves(
    monkeypatch: pytest.MonkeyPatch, heap_blocks: int, slice_size: int
) -> None:
    # The gateway keeps blocks of up to 4 MiB in its heap: a slice of 1 MiB and its encoded
    # copy come from there. Left as malloc sets it, 64 KiB slices (a larger one would be
    # mapped fresh each time).
    monkeypatch.setattr(frames, "heap_blocks_up_to", lambda: heap_blocks)
    assert frames.slice_chars() == slice_size
    frame = {"op": "reply", "id": 5, "ok": True, "value": "x" * (3 * (1 << 20) + 7)}
    sock = _RecordingSocket()
    assert send_frame(sock, frame, time.monotonic() + 60, lambda _s: None)  # type: ignore[arg-type]
    assert bytes(sock.wire) == encode_frame(frame)
    size = 3 * (1 << 20) + 7
    slices = [slice_size] * (size // slice_size) + [size % slice_size]
    # The head (the prefix, the keys, the string's own head) in one send, then the slices.
    assert sock.sizes == [len(encode_frame(frame)) - size, *slices]


def test_the_heap_tells_what_it_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    # A C library that takes the settings (recorded, not applied: the test process keeps its
    # own malloc), and one that refuses them.
    from codemode import heap

    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(heap._kept, "blocks_up_to", 0)
    monkeypatch.setattr(heap, "_libc_function", lambda _name: lambda *a: calls.append(a) or 1)
    assert heap.keep_large_blocks_in_heap()
    assert heap.heap_blocks_up_to() == heap.HEAP_BLOCKS_UP_TO == 32 << 20
    assert calls == [(-3, 32 << 20), (-1, 64 << 20)]  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
    assert frames.slice_chars() == 1 << 20
    monkeypatch.setattr(heap, "_libc_function", lambda _name: lambda *a: 0)
    assert not heap.keep_large_blocks_in_heap()
    assert heap.heap_blocks_up_to() == 0
    assert frames.slice_chars() == 1 << 16

"""Frames the host sends to the guest: the bytes on the wire, partial sends, the deadline."""

from __future__ import annotations

import time
from typing import Any

import pytest

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

"""Keep the head and the tail of a stream of any size in bounded memory."""

from __future__ import annotations

__all__ = ["HeadTail"]


class HeadTail:
    """Keeps the first and last ``keep // 2`` bytes and counts everything."""

    def __init__(self, keep: int) -> None:
        self.half = max(keep // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data[-self.half :]
            if len(self.tail) > 2 * self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def kept(self) -> int:
        return len(self.head) + min(len(self.tail), self.half)

    @property
    def dropped(self) -> int:
        return self.total - self.kept

    def text(self) -> tuple[str, str, int]:
        """(head, tail, bytes dropped between them), decoded leniently."""
        tail = bytes(self.tail[-self.half :])
        return (
            self.head.decode("utf-8", "replace"),
            tail.decode("utf-8", "replace"),
            self.dropped,
        )

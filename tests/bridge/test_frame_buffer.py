"""The buffer a large frame is received into, on the host (``bridge.frames``) and in the guest
(``sandbox/guest/runtime.py``): every page in place before the receive copies in, and huge
pages from 2 MiB on where the kernel hands them out for the asking."""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Callable
from pathlib import Path

import pytest

from codemode.bridge import frames
from codemode.sandbox.guest import runtime

Make = Callable[[int], mmap.mmap]
MAKERS = {"host": frames._frame_buffer, "guest": runtime._buffer}
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def huge_pages_for_the_asking() -> bool:
    try:
        setting = THP.read_text()
    except OSError:
        return False
    return "[madvise]" in setting or "[always]" in setting


def mapping_of(buffer: mmap.mmap) -> dict[str, int]:
    """The buffer's entry in /proc/self/smaps: its sizes in KiB."""
    address = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    fields: dict[str, int] = {}
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            start, end = (int(part, 16) for part in head.split("-"))
            inside = start <= address < end
        elif inside and line.endswith(" kB"):
            fields[head.rstrip(":")] = int(line.split()[1])
    return fields


@pytest.mark.parametrize("side", sorted(MAKERS))
def test_a_ten_megabyte_buffer_is_in_place_and_in_huge_pages(side: str) -> None:
    size = 10_000_000
    buffer = MAKERS[side](size)
    try:
        assert len(buffer) == size
        mapped = mapping_of(buffer)
        assert mapped["Rss"] * 1024 >= size  # every page in place, before any write
        if huge_pages_for_the_asking():
            assert mapped["AnonHugePages"] >= 2048, mapped
        buffer[size - 3 :] = b"end"
        assert buffer[:4] == b"\0\0\0\0" and buffer[size - 3 :] == b"end"
    finally:
        buffer.close()


@pytest.mark.parametrize("side", sorted(MAKERS))
def test_a_one_megabyte_buffer_is_in_place_in_small_pages(side: str) -> None:
    size = 1_000_000
    buffer = MAKERS[side](size)
    try:
        mapped = mapping_of(buffer)
        assert mapped["Rss"] * 1024 >= size
        assert mapped.get("AnonHugePages", 0) == 0
    finally:
        buffer.close()


def test_a_kernel_without_the_populate_advice_gets_the_buffer_mapped_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Linux before 5.14 refuses MADV_POPULATE_WRITE: the buffer is mapped with its pages
    in place all the same (MAP_POPULATE)."""
    monkeypatch.setattr(frames, "_POPULATE_WRITE", 0xFFFF)  # an advice no kernel knows
    size = 4_000_000
    buffer = frames._frame_buffer(size)
    try:
        assert mapping_of(buffer)["Rss"] * 1024 >= size
    finally:
        buffer.close()

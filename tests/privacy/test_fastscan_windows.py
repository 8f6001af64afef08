"""The windows around native hits, merged from their ends alone, are those ``_merged`` makes of
the hits' windows; the run before an address's @ is cut with the bytes its class matches."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.privacy import anchors, fastscan
from codemode.privacy.native import NativeAnchor
from codemode.privacy.scantext import ScanText


@settings(max_examples=500)
@given(
    st.lists(st.integers(0, 400), max_size=40),
    st.integers(0, 40),
    st.integers(0, 40),
    st.integers(1, 400),
)
def test_windows_merged_from_the_ends_are_those_of_the_hits(
    ends: list[int], back: int, forward: int, size: int
) -> None:
    around = fastscan._AroundEnds(NativeAnchor("x", back, forward))
    expected = fastscan._merged(around(ScanText(""), ends), size)
    assert around.merged(ends, size) == expected


@settings(max_examples=500)
@given(
    st.lists(st.integers(1, 60), min_size=1, max_size=6),
    st.data(),
    st.integers(0, 40),
    st.integers(0, 40),
)
def test_windows_merged_in_parts_from_the_ends_are_those_of_the_hits(
    sizes: list[int], data: st.DataObject, back: int, forward: int
) -> None:
    parts, at = [], 0
    for size in sizes:  # texts joined with one separator between them, as ``scan_parts`` does
        parts.append((at, at + size))
        at += size + 1
    # Hits end inside a part (after its first character), in order.
    ends = sorted(
        data.draw(st.lists(st.sampled_from([end for a, b in parts for end in range(a + 1, b + 1)])))
    )
    around = fastscan._AroundEnds(NativeAnchor("x", back, forward))
    expected = fastscan._merged_parts(around(ScanText(""), ends), ends, parts)
    assert around.merged_parts(ends, parts) == expected


def test_the_address_bytes_are_what_the_local_part_class_matches() -> None:
    local = re.compile(rb"[\w.+%\-]")
    assert sorted(anchors._ADDRESS_BYTES) == [b for b in range(256) if local.match(bytes([b]))]

"""The windows around native hits, merged from their ends alone, are those ``_merged`` makes of
the hits' windows (but those whose every hit opens with a digit the card check turns down,
which find nothing); the run before an address's @ is cut with the bytes its class matches."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.privacy import anchors, fastscan, native
from codemode.privacy.detectors import _BUILTINS, DetectorSet
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
    assert around.merged(ends, size, b"") == expected


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
    assert around.merged_parts(ends, parts, b"") == expected


def test_the_address_bytes_are_what_the_local_part_class_matches() -> None:
    local = re.compile(rb"[\w.+%\-]")
    assert sorted(anchors._ADDRESS_BYTES) == [b for b in range(256) if local.match(bytes([b]))]


def test_windows_whose_hits_all_open_with_a_dead_digit_are_left_out() -> None:
    around = fastscan._AroundEnds(NativeAnchor("x", 17, 9, lead=16, dead=b"1789"))
    gap = b" and" * 10  # windows this far apart stay apart
    raw = b" 1999 2001 2002 2003" + gap + b" 4111 1111 1111 1111" + gap + b" 1999 2001 2002 2003"
    years, card = raw.index(b"1999") + 16, raw.index(b"4111") + 16
    later = raw.rindex(b"1999") + 16
    assert around.merged([years, card, later], len(raw), raw) == [(0, card - 17, card + 17)]
    assert around.merged_parts([years, card, later], [(0, len(raw))], raw) == [
        (0, card - 17, card + 17)
    ]
    assert around.merged([years, later], len(raw), raw) == []
    live = fastscan._AroundEnds(NativeAnchor("x", 17, 9, lead=16))
    assert len(live.merged([years, card, later], len(raw), raw)) == 3


# A value of each pattern with dead characters, {} where its anchor's hit decides, and the
# character there that passes the check.
DECIDED = {
    ("CARD", 0): ("{}111 1111 1111 1111", "4"),
    ("CARD", 1): ("{}782 822463 10005", "3"),
    ("CARD", 2): ("{}012888888881881", "4"),
    ("PHONE", 1): ("415 {}55 0142", "5"),
}


def test_the_dead_characters_are_ones_the_check_turns_down() -> None:
    assert {key for key, anchor in native.ANCHORS.items() if anchor.dead} == set(DECIDED)
    for key, (shape, live) in DECIDED.items():
        detector = _BUILTINS[key[0]][key[1]]
        assert detector.validate is not None
        for ch, passes in [(ch, False) for ch in native.ANCHORS[key].dead.decode()] + [
            (live, True)
        ]:
            value = shape.format(ch)
            match = detector.pattern.search(value)
            assert match is not None and match.group() == value, value
            assert detector.validate(match) is passes, value


# Runs of three- and four-digit numbers (years) beside card and phone numbers, the shapes whose
# windows are left out.
NUMBERS = st.lists(
    st.one_of(
        st.integers(100, 9999).map(str),
        st.sampled_from(["4111 1111 1111 1111", "5500-0000-0000-0004", "4012888888881881",
                         "3782 822463 10005", "1234567890123", "7", "٣", "415 555 0142",
                         "(415) 155-0142", "1-800-155-0199", "212.155.0142", "٣١٥"]),
    ),
    max_size=30,
).flatmap(lambda items: st.lists(st.sampled_from([" ", "-", "\n", ", ", "."]),
                                 min_size=len(items), max_size=len(items))
          .map(lambda seps: "".join(a + b for a, b in zip(items, seps, strict=True))))  # fmt: skip


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=NUMBERS)
def test_leaving_dead_windows_out_finds_what_searching_them_finds(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    detectors = DetectorSet()
    detectors._fast_min = 0
    found = detectors.plain(text)
    with monkeypatch.context() as patch:
        for kind in detectors._windowed:
            for group in kind.groups:
                if isinstance(group.native, fastscan._AroundEnds):
                    patch.setattr(group.native, "dead", b"")
        assert detectors.plain(text) == found

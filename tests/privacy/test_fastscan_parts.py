"""Short texts scanned together (``fastscan.scan_parts``, for the windows markup is removed
from) find exactly what each scanned alone finds; told where the texts changed, everything
that lies near a change."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.privacy import fastscan
from codemode.privacy.markup import _markup_positions, markup_detections, near_change
from codemode.privacy.native import native_scanner
from tests.privacy.test_fastscan import MARKUP, SEPARATORS, detector_set, piece

# The separator ``scan_parts`` joins texts with may be in a text too.
parts_of = st.lists(
    st.one_of(piece, st.sampled_from(MARKUP), st.sampled_from([*SEPARATORS, "\x00"])),
    max_size=40,
).map("".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(parts_of, min_size=1, max_size=8))
def test_texts_scanned_together_find_what_each_finds_alone(texts: list[str]) -> None:
    kinds = detector_set(native=True)._windowed
    assert all(kind.all_native for kind in kinds)
    alone = [fastscan.scan(kinds, text)[0] for text in texts]
    assert fastscan.scan_parts(kinds, texts) == alone


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(parts_of, min_size=1, max_size=8),
    places=st.lists(st.lists(st.integers(0, 400), max_size=4), min_size=8, max_size=8),
)
def test_texts_scanned_near_their_changes_find_all_that_lies_near_them(
    texts: list[str], places: list[list[int]]
) -> None:
    kinds = detector_set(native=True)._windowed
    changes = [sorted(at % (len(text) + 1) for at in ats) for text, ats in zip(texts, places)]
    everything = fastscan.scan_parts(kinds, texts)
    near = fastscan.scan_parts(kinds, texts, changes)
    for found, nearby, ats in zip(everything, near, changes):
        wanted = [item for item in found if near_change(ats, item[1], item[2])]
        assert [item for item in nearby if near_change(ats, item[1], item[2])] == wanted
        assert set(nearby) <= set(found)
    # No change anywhere: nothing is searched for.
    assert fastscan.scan_parts(kinds, texts, [[] for _ in texts]) == [[] for _ in texts]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(parts_of, min_size=10, max_size=30).map(" ".join))
def test_markup_windows_detected_together_find_what_each_finds_alone(text: str) -> None:
    detectors = detector_set(native=True)
    one_by_one = markup_detections(text, detectors._window_plain)
    together = markup_detections(text, detectors._window_plain, detect_all=detectors._windows_plain)
    assert together == one_by_one


def test_the_markup_windows_of_long_text_take_one_native_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A line break between digits is markup: each opens a window to scan again (far apart here,
    # so that the windows do not merge).
    filler = "the order was shipped on time and the customer is happy. " * 8
    text = f"Order 17 of 2024\n12 items for ops@example.com, +44 20 7946 0958. {filler}\n" * 60
    detectors = detector_set(native=True)
    scanner = native_scanner()
    assert scanner is not None
    candidates = scanner.markup_candidates(scanner.hits(fastscan._Text(text).raw))
    assert len(_markup_positions(text, candidates)) == 60
    scans: list[int] = []
    hits = scanner.hits
    monkeypatch.setattr(scanner, "hits", lambda raw: scans.append(len(raw)) or hits(raw))
    found = detectors._detect(text)
    assert len(scans) == 2  # the text, then all its markup windows joined
    assert {item.kind for item in found} == {"EMAIL", "PHONE"}

"""What a markup window finds counts only near the markup it was opened for.

A window is the text around a piece of markup, ``markup._WINDOW`` characters each side, with
the markup taken out. Away from the markup the copy reads as the text does, except at the
window's own edges, where it has lost what came before: a window that opens between "build"
and "10.1.2.3" read an address where the text has a version number, and the version was
replaced by an IP token. What a window finds away from its changes is left to the text as
written (``markup.near_change``).
"""

from __future__ import annotations

import pytest

from codemode.privacy.detection import Detection
from codemode.privacy.detectors import DetectorSet
from codemode.privacy.markup import _WINDOW, CHANGE_REACH, markup_detections, normalize

FILLER = "The plan went well and the team shipped on time. "


def version_then_markup(fillers: int, markup: str = "**bold**") -> str:
    """A version number whose markup window (around ``markup`` further on) opens one
    character before it: right after the word that makes it a version."""
    head = FILLER * fillers + "build "
    text = head + "10.1.2.3 was deployed to every host without trouble" + " and then" * 30
    # The window opens ``_WINDOW`` before the markup's place (a line break between digits is
    # at its break): here, on the space after "build".
    place = markup.find("\n") if "\n" in markup else 0
    at = len(head) + _WINDOW - 1 - place
    return text[:at] + markup + text[at:]


def detector_sets() -> list[DetectorSet]:
    native, pure = DetectorSet(), DetectorSet()
    pure.use_native_anchors(False)
    return [native, pure]


@pytest.mark.parametrize("fillers", [2, 120], ids=["short text", "long text"])
@pytest.mark.parametrize("markup", ["**bold**", "<em>x</em>", "7\n8", "[1]"])
def test_a_version_number_near_a_window_edge_is_not_read_as_an_address(
    fillers: int, markup: str
) -> None:
    text = version_then_markup(fillers, markup)
    for detectors in detector_sets():
        assert detectors.plain(text) == ()  # as written: a version, not an address
        assert [d.kind for d in detectors.detect(text)] == []


@pytest.mark.parametrize("fillers", [2, 120], ids=["short text", "long text"])
@pytest.mark.parametrize(
    ("written", "kind", "value"),
    [
        ("maria.lopez@[globex].example.com", "EMAIL", "maria.lopez@globex.example.com"),
        ("<em>maria</em>.lopez@globex.example.com", "EMAIL", "maria.lopez@globex.example.com"),
        ("+44 20 [7946] 0958", "PHONE", "+44 20 7946 0958"),
        ("**+44** 20 7946 0958", "PHONE", "+44 20 7946 0958"),
        ("...maria.lopez@globex.example.com...", "EMAIL", "maria.lopez@globex.example.com"),
        ("maria.lopez @ globex.example.com", "EMAIL", "maria.lopez@globex.example.com"),
        ("card 4111\n1111 1111 1111", "CARD", "4111 1111 1111 1111"),
    ],
)
def test_values_that_markup_splits_are_still_found(
    fillers: int, written: str, kind: str, value: str
) -> None:
    text = f"{FILLER * fillers}Write to {written} today. {FILLER * fillers}"
    for detectors in detector_sets():
        found = [(d.kind, d.value) for d in detectors.detect(text)]
        assert (kind, value) in found


def test_the_copy_of_a_window_says_where_it_differs() -> None:
    text = "call +44 20 [7946] 0958 or **maria** at 12\n34"
    clean, mapping = normalize(text)
    assert clean == "call +44 20 7946 0958 or maria at 12 34"
    # The brackets and the bold are taken out (a place between two characters); the line
    # break between two digits is replaced by a space (the place of that space).
    assert mapping.changes == [12, 16, 25, 30, 36]
    assert clean[36] == " "
    assert CHANGE_REACH >= 16  # ``ipv4_valid`` reads 16 characters back for a version word


@pytest.mark.parametrize(
    ("written", "windows"),
    [
        ("Ada Lovelace <ada@example.com> wrote on 2024-05-02\nGrace", 0),  # a mail header
        ("if a < b and 7 > 3: print(x)", 0),  # a comparison
        ("<div class='row'>the order</div>", 0),  # other HTML
        ("a total of 12\nthanks", 0),  # a line break after a digit, not between two
        ("a - @ - b", 0),  # a needle (" @") that the copy leaves as it is
        ("see <em>maria</em> today", 1),  # a highlight tag
        ("see <SPAN class='hl'>maria</SPAN> today", 1),
        ("a **b** c", 1),
    ],
)
def test_markup_windows_open_only_where_the_copy_differs(written: str, windows: int) -> None:
    """A window is searched again only where taking markup out changes the text: a "<" of a
    mail header or a comparison opens none (each would cost a second pass over dense text)."""
    text = f"{FILLER * 60}{written} {FILLER * 60}"
    searched: list[str] = []

    def detect(window: str) -> list[Detection]:
        searched.append(window)
        return []

    markup_detections(text, detect)
    assert len(searched) == windows, searched


def test_a_highlight_tag_among_angle_brackets_is_still_taken_out() -> None:
    text = f"{FILLER * 60}From <ops@example.com>: call <em>+44</em> 20 7946 0958. {FILLER * 60}"
    for detectors in detector_sets():
        found = [(d.kind, d.value) for d in detectors.detect(text)]
        assert ("PHONE", "+44 20 7946 0958") in found
        assert ("EMAIL", "ops@example.com") in found

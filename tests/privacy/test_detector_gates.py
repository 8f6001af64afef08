"""The cheap tests in front of the detectors turn away only text they would find nothing in:
detection with the number gate finds what it finds with the plain six-digit gate, on text made
to sit at its edges (digits after letters, after ``_``, ``-`` and ``.``, capitals before
digits, ``+`` and ``(`` before them, digits of other scripts); one search for the markup hints
says what a search for each says."""

from __future__ import annotations

import random

import pytest

from codemode.privacy import detectors as detectors_module
from codemode.privacy import markup as markup_module
from codemode.privacy.detectors import DetectorSet
from codemode.privacy.markup import has_markup

PIECES = [
    "4111 1111 1111 1111",
    "4111111111111111",
    "123-45-6789",
    "+49 30 1234567",
    "+44 (20) 7946",
    "(415) 555-0142",
    "415-555-0142",
    "020 7946 0958",
    "DE44 5001 0517 5407 3249 31",
    "GB82WEST12345698765432",
    "QQ 12 34 56 C",
    "AB123456C",
    "X1234567L",
    "12345678Z",
    "65929970489",
    "c777000",
    "user777000",
    "ord_1234567",
    "INV-0142-9981",
    "v1.2.3.456789",
    "2024-05-02",
    "10:20:30",
    "\u0663\u0664\u0665\u0666\u0667\u0668",  # Arabic-Indic digits
    "\u00e9123456",
    "x",
    "Z",
    "DE",
    "_",
    "-",
    ".",
    "+",
    "(",
    ")",
    " ",
    "  ",
    "/",
    "@",
    "\n",
    "0",
    "7",
    "42",
    "1234",
    "99999",
    "abc",
    "ID",
    "no.",
]


def texts(count: int) -> list[str]:
    rng = random.Random(21)
    return ["".join(rng.choices(PIECES, k=rng.randint(1, 9))) for _ in range(count)]


def test_the_number_gate_turns_away_no_text_a_number_pattern_matches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    samples = texts(6000)
    gated = DetectorSet()
    found = [gated.reference_plain(text) for text in samples]
    assert sum(bool(f) for f in found) > 1000  # the texts do hold values
    number_kinds = {d.kind for f in found for d in f} - {"EMAIL", "IP", "SECRET"}
    assert {"CARD", "SSN", "PHONE", "IBAN", "UK_NINO", "ES_DNI", "DE_TAX_ID"} <= number_kinds
    # How many texts the number gate turns away that the six digits let through.
    turned_away = sum(
        detectors_module._six_digits(text) and not detectors_module._number_value(text)
        for text in samples
    )
    assert turned_away > 150
    monkeypatch.setattr(detectors_module, "_number_value", detectors_module._six_digits)
    detectors_module._shared_gate_groups.cache_clear()
    try:
        plain = DetectorSet()
        assert [plain.reference_plain(text) for text in samples] == found
    finally:
        monkeypatch.undo()
        detectors_module._shared_gate_groups.cache_clear()


def test_ids_with_six_digits_after_a_letter_are_not_read_by_the_number_patterns() -> None:
    for text in ("c7770001", "user777000@example0.com", "ord_1234567", "v2_20240502"):
        assert detectors_module._six_digits(text)
        assert not detectors_module._number_value(text), text
    for text in ("call 4155550142", "+4930123456", "(415) 555-0142", "DE44500105175407324931"):
        assert detectors_module._number_value(text), text


def test_one_search_for_markup_hints_says_what_a_search_for_each_says() -> None:
    hints = list(markup_module._HINTS)
    rng = random.Random(4)
    parts = [*hints, "a", "1", " ", ".", "*", "_", "@", "\u2026", "\u00e9", "<b", "]x["]
    samples = ["".join(rng.choices(parts, k=rng.randint(0, 12))) for _ in range(5000)]
    samples += ["x" * 250 + hint for hint in hints] + ["x" * 300 + hint for hint in hints]
    assert sum(has_markup(text) for text in samples) > 1000
    assert sum(not has_markup(text) for text in samples) > 100
    for text in samples:
        assert has_markup(text) == any(hint in text for hint in hints), repr(text)

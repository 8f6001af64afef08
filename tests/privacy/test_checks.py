"""The checks' shortcuts decide as the plain rules they stand in for."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.privacy import checks
from codemode.privacy.detectors import DetectorSet

# Pieces of the version context: its words in any case, what may follow them, and look-alikes.
WORDS = ["version", "VER", "Release", "build", "v", "V", "ven", "bui", "n", "d", "é", "x", "1"]
AFTER = [".", " ", "\t", "\n", "\u2003", "\u00a0", "\x1c", ":", "=", ": ", " = "]
CONTEXT_PIECES = st.sampled_from([*WORDS, *AFTER])
DIGITS_TEXT = st.text(alphabet="0123456789 +-().ab\u00b2\u0663\uff15\u2009", max_size=30)


@settings(max_examples=500)
@given(st.lists(CONTEXT_PIECES, max_size=8).map("".join))
def test_the_version_context_shortcut_agrees_with_its_regex(before: str) -> None:
    expected = checks._VERSION_CONTEXT.search(before) is not None
    assert checks._after_version_word(before) == expected


@settings(max_examples=500)
@given(DIGITS_TEXT)
def test_digits_are_those_str_isdigit_accepts(text: str) -> None:
    assert checks._digits(text) == "".join(ch for ch in text if ch.isdigit())


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("request from 10.0.3.4 took", True),
        ("version 10.0.3.4", False),
        ("Ver: 10.0.3.4", False),
        ("BUILD\u2003=\n10.0.3.4", False),
        ("release:= 10.0.3.4", False),
        ("rev 10.0.3.4", False),  # "v" is a version word of its own
        ("seven 10.0.3.4", True),
        ("bread 10.0.3.4", True),  # ends as "build" does, but is no version word
        ("0.1.2.3 and 255.255.255.0", False),
    ],
)
def test_ipv4_after_a_version_word_or_with_a_reserved_first_group(text: str, found: bool) -> None:
    kinds = {item.kind for item in DetectorSet(["IP"]).detect(text)}
    assert ("IP" in kinds) == found

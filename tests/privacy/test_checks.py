"""The checks' shortcuts decide as the plain rules they stand in for."""

from __future__ import annotations

import re
import sys

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


def test_the_context_gap_is_what_its_class_matches() -> None:
    gap = re.compile(r"[\s:=]")
    every = "".join(ch for ch in map(chr, range(sys.maxunicode + 1)) if gap.match(ch))
    assert sorted(checks.CONTEXT_GAP) == sorted(every)


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


CARDS = st.one_of(
    st.text(alphabet="0123456789", min_size=12, max_size=20),
    st.lists(st.text(alphabet="0123456789\u0663", min_size=1, max_size=6), min_size=2, max_size=6)
    .flatmap(lambda groups: st.sampled_from([" ", "-", " -"]).map(lambda sep: sep.join(groups))),
    st.sampled_from(["4111 1111 1111 1111", "4111-1111-1111-1111", "4111 1111-1111 1111",
                     "3782 822463 10005", "5500 0000 0000 0004", "6011000990139424"]),
)  # fmt: skip


@settings(max_examples=1000)
@given(CARDS)
def test_the_card_check_decides_as_its_plain_rules(value: str) -> None:
    match = re.fullmatch(r".+", value)
    assert match is not None
    assert checks.card_valid(match) == _card_valid_plain(value)


def _card_valid_plain(raw: str) -> bool:
    """The card rules written out plainly: one kind of separator, 13-19 digits not all alike,
    a known issuer prefix whose length fits, and the Luhn check."""
    if len({ch for ch in raw if not ch.isdigit()}) > 1:
        return False
    digits = "".join(ch for ch in raw if ch.isdigit())
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    issuer = any(
        low <= int(digits[: len(str(low))]) <= high and len(digits) in lengths
        for low, high, lengths in checks._CARD_ISSUERS
    )
    return issuer and checks.luhn_valid(digits)


@settings(max_examples=1000)
@given(st.text(alphabet="0123456789", min_size=1, max_size=24))
def test_the_luhn_check_is_the_textbook_one(digits: str) -> None:
    """From the right: every second digit doubled (less 9 over 9), the sum a multiple of 10."""
    total = 0
    for index, digit in enumerate(reversed(digits)):
        value = int(digit) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    assert checks.luhn_valid(digits) == (total % 10 == 0)


# Shapes the NANP pattern matches, with ASCII and other decimal digits.
NANP_DIGITS = st.sampled_from("0123456789\u0663\uff15")
NANP = st.tuples(
    st.sampled_from(["", "1 ", "1-", "1."]),
    st.lists(NANP_DIGITS, min_size=10, max_size=10).map("".join),
    st.sampled_from(["({}) ", "({})", "{}-", "{} ", "{}."]),
    st.sampled_from(["-", " ", "."]),
).map(lambda p: p[0] + p[2].format(p[1][:3]) + p[1][3:6] + p[3] + p[1][6:])


@settings(max_examples=1000)
@given(NANP)
def test_the_nanp_check_decides_as_its_plain_rules(value: str) -> None:
    match = re.fullmatch(r".+", value)
    assert match is not None
    digits = "".join(ch for ch in value if ch.isdigit())[-10:]
    area, exchange = digits[:3], digits[3:6]
    plain = area[0] not in "01" and exchange[0] not in "01" and "11" not in (area[1:], exchange[1:])
    assert checks.nanp_valid(match) == plain


@settings(max_examples=1000)
@given(
    st.lists(
        st.one_of(st.integers(0, 255).map(str), st.sampled_from(["\u0660", "\u0662\u0665\u0665"])),
        min_size=4,
        max_size=4,
    ).map(".".join)
)
def test_the_ipv4_first_group_check_decides_as_its_plain_rule(value: str) -> None:
    match = re.fullmatch(r".+", value)
    assert match is not None
    assert checks.ipv4_valid(match) == (int(value.split(".", maxsplit=1)[0]) not in {0, 255})

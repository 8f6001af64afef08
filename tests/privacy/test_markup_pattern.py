"""The markup pattern, written so that ``re`` can skip ahead, finds what its plain form finds."""

from __future__ import annotations

import re
import sys

from hypothesis import example, given, settings
from hypothesis import strategies as st

from codemode.privacy import markup

# The pattern as it reads plainly (what ``markup`` documents as markup).
PLAIN = re.compile(
    r"</?(?:em|b|strong|mark|i|u|span|hl)(?:\s[^<>]{0,60})?>"
    r"|\*\*|__|[\[\]]"
    r"|(?P<gap>\.\.\.|…)"
    r"|(?<=[\w.])[ \t]+(?=@)|(?<=@)[ \t]+(?=\w)"
    r"|(?<=\d)(?P<digits>\s{2,}|[^\S ])(?=\d)",
    re.IGNORECASE,
)
PIECES = st.sampled_from(
    ["<em>", "</EM>", "<span class='x'>", "</b>", "<bx>", "**", "*", "__", "_", "[", "]", "...",
     "..", "…", "@", "a", "Z", "é", "7", "٣", "²", ".", "-", "x.y", "maria", "+44", "0958",
     *markup._WHITESPACE]
)  # fmt: skip


def test_the_whitespace_is_all_that_backslash_s_matches() -> None:
    space = re.compile(r"\s")
    every = "".join(ch for ch in map(chr, range(sys.maxunicode + 1)) if space.match(ch))
    assert markup._WHITESPACE == every


@settings(max_examples=1500)
@given(st.lists(PIECES, max_size=40).map("".join), st.integers(0, 8))
def test_the_markup_pattern_finds_what_its_plain_form_finds(text: str, start: int) -> None:
    plain = [
        (m.start(), m.end(), bool(m.group("gap") or m.group("digits")))
        for m in PLAIN.finditer(text, start)
    ]
    fast = [(m.start(), m.end(), bool(m.lastindex)) for m in markup._MARKUP.finditer(text, start)]
    assert fast == plain


# Few pieces, so that spaces, @ and digits meet often.
TIGHT = st.sampled_from(
    ["a", "7", ".", "@", " ", "  ", "\t", "\n", "\u00a0", "<em>", "**", "__", "…"]
)


@settings(max_examples=1500)
@given(
    st.one_of(st.lists(PIECES, max_size=40), st.lists(TIGHT, max_size=20)).map("".join),
    st.integers(0, 8),
    st.integers(0, 8),
)
# A space opens markup after @, before it, before other whitespace, and at the start.
@example("x@ a", 0, 0)
@example("a @b", 0, 0)
@example("7 \n7", 0, 0)
@example("@ a", 1, 0)
def test_normalize_removes_what_a_search_of_the_pattern_finds(
    text: str, start: int, cut: int
) -> None:
    end = max(start, len(text) - cut)
    matches = list(markup._MARKUP.finditer(text, start, end))
    # normalize tries the pattern only where ``_match_starts`` says a match may start.
    assert {m.start() for m in matches} <= set(markup._match_starts(text, start, end))
    kept, position = [], start
    for m in matches:
        kept.append(text[position : m.start()] + (" " if m.lastindex else ""))
        position = m.end()
    kept.append(text[position:end])
    assert markup.normalize(text, start, end)[0] == "".join(kept)


@settings(max_examples=1500)
@given(st.lists(TIGHT, max_size=30).map("".join), st.integers(0, 4))
@example("7\n7", 0)
@example("a**7\t7", 0)
def test_a_copy_that_replaces_one_for_one_maps_back_by_its_offset(text: str, start: int) -> None:
    clean, mapping = markup.normalize(text, start)
    if mapping.offset is None:
        return
    for position in range(1, len(clean) + 1):
        assert mapping.end(position) == mapping.offset + position, (text, position)
        if position < len(clean):
            assert mapping.start(position) == mapping.offset + position, (text, position)


def test_whitespace_between_digits_maps_back_by_an_offset() -> None:
    assert markup.normalize("x 7\n7 y", 2)[1].offset == 2
    assert markup.normalize("x 7\n\n7 y", 2)[1].offset is None  # two characters become one

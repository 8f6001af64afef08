"""What the host knows: the pieces of hidden values that arguments carry, in any shape, and
what does not count as a piece (words seen in clear, short digit runs, shared grams)."""

from __future__ import annotations

import random
import re
import unicodedata
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from codemode.privacy import TokenSource, Vault
from codemode.privacy import pieces as pieces_module
from codemode.privacy.pieces import (
    _CONFUSABLES,
    Hidden,
    Knowledge,
    Piece,
    _distinct_lines,
    _seeds,
    fold,
    words_of,
)
from codemode.privacy.tokenizer import OUTPUT_SOURCE

SECRET = "jordan.blake@acme.example.com"  # skeleton jordanblakeacmeexamplecom


def knowledge(*values: tuple[str, str], server: str = "crm") -> Knowledge:
    vault = Vault()
    for kind, value in values:
        vault.token_for(kind, value, TokenSource(server, "get", kind.lower()))
    return Knowledge(vault)


def spans(found: dict[int, list[Piece]], index: int = 0) -> set[tuple[int, int]]:
    return {(piece.start, piece.end) for piece in found.get(index, [])}


def test_fold_undoes_case_width_and_look_alike_letters() -> None:
    assert fold("\uff2a\u043eRd\u0410n") == "jordan"  # fullwidth J, Cyrillic o and A


@given(st.text(alphabet=st.characters(max_codepoint=0x7F)))
def test_fold_of_ascii_is_the_full_fold(text: str) -> None:
    full = unicodedata.normalize("NFKC", text).casefold().translate(_CONFUSABLES)
    assert fold(text) == full


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("BlAkE", (6, 11)),  # case
        ("%b_l_a_k_e%", (6, 11)),  # wildcards
        ("b l a k e", (6, 11)),  # whitespace
        ("bl\u0430k\u0435", (6, 11)),  # look-alikes (Cyrillic a and e)
        ("ekalb", (6, 11)),  # reversed
        ("jo", (0, 2)),  # a whole argument of two characters
        ("SELECT * FROM t WHERE email LIKE '%acme.ex%'", (11, 17)),  # inside other text
    ],
)
def test_a_piece_is_found_in_any_shape(argument: str, expected: tuple[int, int]) -> None:
    found = spans(knowledge(("EMAIL", SECRET)).pieces({"q": argument}))
    assert any(start <= expected[0] and expected[1] <= end for start, end in found), found


def test_a_pattern_places_its_characters() -> None:
    known = knowledge(("EMAIL", SECRET))
    assert spans(known.pieces({"q": "j%"})) == {(0, 1)}
    (placed,) = known.pieces({"q": "___d%"})[0]
    assert (placed.start, placed.end, placed.placed) == (3, 4, True)
    assert placed.grows(Piece(2, 3, frozenset({2}), placed=True))


@given(st.text(alphabet=st.sampled_from("ab1 .-_@\u00e9\u0430\uff2a\n\x00\x7f\u00ff")))
def test_words_of_are_the_runs_of_letters_and_digits_of_three_or_more(text: str) -> None:
    # The ASCII fast path and the regular expression agree (the plain rule, written out).
    folded = fold(text)
    assert words_of(folded) == {w for w in re.findall("[0-9a-z]+", folded) if len(w) >= 3}


@given(
    st.lists(st.text(alphabet=st.sampled_from("ab1 .-_@\u00e9\n")), min_size=1, max_size=4),
    st.lists(st.integers(min_value=0, max_value=3), min_size=16, max_size=40),
)
def test_repeated_lines_give_the_same_words(lines: list[str], order: list[int]) -> None:
    # Text whose first lines repeat is read a line once: the same words as the plain rule.
    folded = fold("\n".join(lines[at % len(lines)] for at in order))
    assert words_of(folded) == {w for w in re.findall("[0-9a-z]+", folded) if len(w) >= 3}


def test_a_result_of_repeated_lines_is_read_a_line_once() -> None:
    rows = "\n".join(["order 4417 shipped to berlin"] * 100 + ["kofi okafor"])
    assert _distinct_lines(rows).count("order") == 1
    assert sorted(_distinct_lines(rows).split("\n")) == [
        "kofi okafor",
        "order 4417 shipped to berlin",
    ]
    varied = "\n".join(f"row {n}" for n in range(100)) + "\nrow 1"
    assert _distinct_lines(varied) is varied  # first lines differ: read as it is


@given(
    st.text(alphabet="abcd1", max_size=60),
    st.frozensets(st.text(alphabet="abcd1", min_size=3, max_size=3), max_size=100),
)
@example("aaaa", frozenset({"aaa"}))  # overlapping places of one gram
@example("abababa", frozenset({"aba", "bab"}))
def test_seeds_are_where_rare_grams_start(chars: str, rare: frozenset[str]) -> None:
    # Few grams are looked for one by one, many position by position: the same places.
    assert _seeds(chars, rare) == [at for at in range(len(chars) - 2) if chars[at : at + 3] in rare]


def test_words_seen_in_clear_are_not_hidden() -> None:
    known = knowledge(("EMAIL", SECRET))
    known.saw({"customers": [{"name": "Jordan Blake"}]})
    assert known.pieces({"q": "Jordan Blake"}) == {}
    (piece,) = known.pieces({"q": "jordan blake acme"})[0]
    assert piece.hidden == frozenset(range(11, 15))  # only "acme" was not known


def test_what_is_not_a_piece() -> None:
    known = knowledge(("PHONE", "+1 415 555 0142"), ("EMAIL", SECRET))
    assert known.pieces({"id": 142, "q": "4155"}) == {}  # digit runs count from six
    assert 0 in known.pieces({"q": "555014"})
    assert known.pieces({"<EMAIL_1>": "x", "q": "<EMAIL_1>"}) == {}  # tokens, parameter names


def test_grams_many_values_share_are_not_pieces() -> None:
    values = [("EMAIL", f"user{n}.x@example.org") for n in range(12)]
    known = knowledge(*values, ("EMAIL", SECRET))
    assert known.pieces({"q": "example"}) == {}  # in every address
    assert 12 in known.pieces({"q": "acme.example"})  # seeded by acme, it runs on


def test_values_the_code_printed_itself_are_not_hidden() -> None:
    assert knowledge(("EMAIL", SECRET), server=OUTPUT_SOURCE).pieces({"q": "blake"}) == {}


@given(st.text(alphabet=st.sampled_from("abz09 _-.,\n\tAZé٣ßİ"), max_size=80))
@example("kofi11@example.com, +44 20")
@example("café ٣٣ Straße")
def test_alnum_runs_are_the_runs_the_pattern_finds(text: str) -> None:
    from codemode.privacy.pieces import _ALNUM_RUN, _alnum_runs

    folded = fold(text)
    assert _alnum_runs(folded) == _ALNUM_RUN.findall(folded)


class _EveryPlace(Knowledge):
    """The index as it was: the places of every gram kept, the rare ones chosen after."""

    def _take(self, entries: list[Any]) -> None:
        for entry in entries:
            self._count += 1
            origins = frozenset(entry.origins) - {OUTPUT_SOURCE}
            raw = fold(str(entry.value))
            skeleton = re.sub(r"[^0-9a-z]+", "", raw)
            if not origins or len(skeleton) < 6:
                continue
            index = len(self.values)
            self.values.append(Hidden(entry.token, skeleton, origins, raw))
            for offset in range(len(skeleton) - 2):
                self._grams.setdefault(skeleton[offset : offset + 3], []).append((index, offset))
            for gram in {skeleton[i : i + 3] for i in range(len(skeleton) - 2)}:
                self._spread[gram] = self._spread.get(gram, 0) + 1
        self._rare = frozenset(g for g, n in self._spread.items() if n <= pieces_module._COMMON)
        self._rare_chars = frozenset(map(tuple, self._rare))


def test_keeping_only_the_places_of_rare_grams_finds_the_same_pieces() -> None:
    rng = random.Random(8)
    vault = Vault()
    source = TokenSource("crm", "list", "contacts")
    names = ["maria.lopez", "kofi.annan", "jordan.blake", "ana.silva", "lars.berg"]
    for batch in range(4):  # four results: grams turn common between two of them
        values = [
            (
                "EMAIL",
                f"{rng.choice(names)}{rng.randint(0, 400)}@{rng.choice(['acme', 'globex'])}.com",
            )
            for _ in range(150)
        ] + [("PHONE", f"+49 30 {rng.randint(1_000_000, 9_999_999)}") for _ in range(100)]
        vault.tokens_for(values, source)
        pruned, plain = Knowledge(vault), _EveryPlace(vault)
        arguments = []
        for entry in rng.sample(list(vault.entries()), 40):
            value = str(entry.value)
            start = rng.randint(0, len(value) // 2)
            arguments.append({"q": value[start : start + rng.randint(3, 12)], "n": batch})
            arguments.append({"body": f"write to {value.upper()} about {rng.choice(names)}"})
        arguments += [{"q": "acme.com"}, {"q": "4930"}, {"q": "lopez"}, {"q": "ma"}]
        found = [pruned.pieces(argument) for argument in arguments]
        assert found == [plain.pieces(argument) for argument in arguments]
        assert sum(bool(f) for f in found) > 40
    assert "com" not in pruned._grams and "com" in plain._grams  # common: no places kept
    kept = sum(map(len, pruned._grams.values()))
    assert kept < sum(map(len, plain._grams.values())) / 3

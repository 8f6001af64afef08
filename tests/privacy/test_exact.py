"""ExactIndex: every place of every value, as ``str.find`` from each place plus one finds them,
whether a value is found through its rare character or by ``str.find``."""

from __future__ import annotations

import random

from codemode.privacy import TokenSource, Vault, exact
from codemode.privacy.exact import ExactIndex
from codemode.privacy.recall import FRAGMENT_SCAN_MAX, Recall, RecallHit, _exact_hit

VALUES = [
    "maria.lopez@globex.example.com",
    "lopez@globex.example.com",  # the end of another value, same window from the @
    "+44 20 7946 0958",
    "+1 312 555 0199",
    "(312) 555-0199",
    "Chloe Chen",  # no rare character: found by str.find
    "aa@aa@aa",  # overlaps itself
    "@@@@",
    "a_b#c",
    "caf\u00e9@\u4e2d\u6587.cn",
]
PIECES = [*VALUES, "@", "+", "(", "#", "_", " ", "a", "aa@", "maria.", "\u00e9", "\n", "lopez@"]


def places(value: str, text: str) -> list[int]:
    found, start = [], text.find(value)
    while start >= 0:
        found.append(start)
        start = text.find(value, start + 1)
    return found


def random_text(rng: random.Random, pieces: list[str], count: int) -> str:
    return "".join(rng.choice(pieces) + rng.choice(["", " ", "@", "-"]) for _ in range(count))


def test_every_place_of_every_value_is_found() -> None:
    rng = random.Random(5)
    index = ExactIndex(VALUES)
    found_any = 0
    for _ in range(300):
        text = random_text(rng, PIECES, rng.randint(0, 400))
        assert index.starts(text) == [places(value, text) for value in VALUES]
        assert index.starts(text, first=True) == [places(value, text)[:1] for value in VALUES]
        found_any += sum(map(bool, index.starts(text)))
    assert found_any > 1000


def test_values_are_found_by_their_rare_character_not_by_find() -> None:
    index = ExactIndex(VALUES)
    text = "write to maria.lopez@globex.example.com or +1 312 555 0199 and Chloe Chen"
    chars = sorted(group.char for group in index._groups)
    assert chars == ["#", "(", "+", "@"]
    assert [VALUES[i] for i in index._plain] == ["Chloe Chen"]
    assert index.starts(text) == [places(value, text) for value in VALUES]


def test_a_text_thick_with_the_rare_character_falls_back_to_find() -> None:
    index = ExactIndex(["x@y.example", "+1 555 0100"])
    group = next(g for g in index._groups if g.char == "@")
    text = "@" * 100_000 + "x@y.example" + "@x@y.example"
    assert not index._anchored(group, text, [[], []])  # too many places: not worth it
    assert index.starts(text) == [[100_000, 100_012], []]


def test_the_budget_grows_with_the_text_and_the_group() -> None:
    index = ExactIndex(["a@b.example"])
    group = index._groups[0]
    within = "@ " * 62 + "a@b.example"  # 63 places and 1 comparison: the smallest budget
    assert index._anchored(group, within, [[]])
    assert not index._anchored(group, "@ " * 63 + "a@b.example", [[]])
    long = ("@" + " " * 1023) * (exact._PLACES_PER_MIB - 1) + "a@b.example"
    found: list[list[int]] = [[]]
    assert index._anchored(group, long + " " * (1 << 20), found)
    assert found == [[len(long) - 11]]


def test_long_text_hits_are_the_hits_recall_makes() -> None:
    vault = Vault()
    token = vault.token_for("EMAIL", "a@b.example", TokenSource("crm", "get", "email"))
    entry = vault.lookup(token)
    assert entry is not None
    assert _exact_hit(3, 14, entry) == RecallHit(3, 14, entry)
    recall = Recall(vault)
    recall.refresh()
    text = "to a@b.example" + " " * FRAGMENT_SCAN_MAX + "a@b.example"
    assert recall.find(text) == [
        RecallHit(3, 14, entry),
        RecallHit(len(text) - 11, len(text), entry),
    ]


def test_values_alike_in_a_list_of_them_fall_back_to_find() -> None:
    # Every "+" starts the same 8 characters: each place would be compared with every value.
    values = [f"+1 312 555 {n:04d}" for n in range(100)]
    index = ExactIndex(values)
    group = index._groups[0]
    assert [(before, after, list(by_key)) for before, after, by_key in group.shapes] == [
        (0, 6, ["+1 312"])
    ]
    text = "".join(f"+1 312 555 {n:04d}\n" for n in range(5000, 5200)) + values[7]
    assert not index._anchored(group, text, [[] for _ in values])
    assert index.starts(text) == [places(value, text) for value in values]
    assert index.starts(text)[7] == [len(text) - len(values[7])]
    assert index.starts(text, first=True) == [places(value, text)[:1] for value in values]


def test_the_first_places_only_stop_at_the_last_value_found() -> None:
    index = ExactIndex(["a@b.example", "c@d.example"])
    group = index._groups[0]
    # 102 places and 102 comparisons: over the budget (128) for every place, not for the first.
    text = "a@b.example c@d.example " + "a@b.example " * 100
    assert not index._anchored(group, text, [[], []])
    found: list[list[int]] = [[], []]
    assert index._anchored(group, text, found, first=True)
    assert found == [[0], [12]]

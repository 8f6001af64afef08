"""``Knowledge.saw`` reads a whole result at once: the words it takes in are those of each of
its strings read alone, for results of many small strings and for text that folding changes
(compatibility forms, combining marks, look-alike letters), and no more than the cap."""

from __future__ import annotations

import random

from codemode.privacy import pieces
from codemode.privacy.pieces import Knowledge
from codemode.privacy.vault import Vault

PARTS = ["Maria", " ", "Lopez", "\u0301", "e\u0301", "\ufb01ne", "\u0410\u0412C", "K\u212aelvin"]
PARTS += ["\n", "Globex-Corp", "x9", "\u00df", "\u0131stanbul", "ops@example.com", "\t", "42"]


def results(count: int) -> list[object]:
    rng = random.Random(21)
    made: list[object] = []
    for _ in range(count):
        rows = [
            {"name": "".join(rng.choices(PARTS, k=rng.randint(0, 6))), "n": rng.randint(0, 99)}
            for _ in range(rng.randint(0, 12))
        ]
        made.append({"rows": rows, "note": "".join(rng.choices(PARTS, k=rng.randint(0, 20)))})
    return made


def strings_of(result: object) -> list[str]:
    return list(pieces._texts(result, keys=True, items=None))


def test_a_result_read_at_once_gives_the_words_of_its_strings_read_alone() -> None:
    for result in results(400):
        whole, alone = Knowledge(Vault()), Knowledge(Vault())
        whole.saw(result)
        for text in strings_of(result):
            alone.saw(text)
        assert whole._public == alone._public
        assert whole._public_sorted == sorted(whole._public)


def test_a_result_of_many_records_is_read_in_one_pass(monkeypatch) -> None:
    reads: list[int] = []
    words_of = pieces.words_of

    def counted(folded: str) -> set[str]:
        reads.append(len(folded))
        return words_of(folded)

    monkeypatch.setattr(pieces, "words_of", counted)
    knowledge = Knowledge(Vault())
    records = [{"name": f"Person{i}", "city": f"Town{i % 7}"} for i in range(5000)]
    knowledge.saw(records)
    assert len(reads) == 1
    assert {"person4999", "town6", "name", "city"} <= knowledge._public


def test_words_beyond_the_cap_are_not_taken_in(monkeypatch) -> None:
    monkeypatch.setattr(pieces, "_MAX_PUBLIC", 100)
    knowledge = Knowledge(Vault())
    knowledge.saw([f"word{i:04d}" for i in range(150)])
    assert len(knowledge._public) == 100
    knowledge.saw(["another"])
    assert "another" not in knowledge._public

"""The recall's shortcuts read what the plain way reads: an ASCII skeleton made from bytes, and
the hint that any spelled-out address ("maria at globex dot com") holds; the offsets of a
skeleton's characters made from bytes; and a walk that looks only where a gram of a value is."""

from __future__ import annotations

import random

import pytest

from codemode.privacy import recall as recall_module
from codemode.privacy.recall import (
    _SPELLED,
    _SPELLED_HINT,
    Recall,
)
from codemode.privacy.skeletons import ALNUM, NOT_ALNUM, Offsets, skeleton_of
from codemode.privacy.vault import TokenSource, Vault

PARTS = [" at ", "at", " dot ", "(at)", "[dot]", "{at}", "\tat\n", "a", "Z", "9", ".", "@", " "]
PARTS += ["\u00e9", "\u212a", "\u0131", "-", "_", "maria", "globex", "com", "dota", "cat "]


def random_texts(count: int) -> list[str]:
    rng = random.Random(3)
    return ["".join(rng.choices(PARTS, k=rng.randint(0, 30))) for _ in range(count)]


def test_the_skeleton_of_ascii_text_is_the_plain_one() -> None:
    texts = [text.lower() for text in random_texts(3000)]
    assert sum(text.isascii() for text in texts) > 100  # both ways are taken
    assert sum(not text.isascii() for text in texts) > 100
    for text in texts:
        assert skeleton_of(text) == NOT_ALNUM.sub("", text)


def test_every_spelled_out_address_holds_the_hint() -> None:
    matched = 0
    for text in random_texts(5000):
        lowered = text.lower()
        if _SPELLED.search(lowered) is not None:
            matched += 1
            assert _SPELLED_HINT.search(lowered) is not None
    assert matched > 500


def test_the_offsets_of_skeleton_characters_are_the_plain_ones() -> None:
    rng = random.Random(5)
    texts = random_texts(3000)
    # Long ones too: offsets found a block of 1 KiB at a time, blocks without one included.
    ascii_parts = [part for part in PARTS if part.isascii()] + [" " * 1500]
    texts += ["".join(rng.choices(ascii_parts, k=rng.randint(100, 900))) for _ in range(60)]
    for text in texts:
        lowered = text.lower()
        plain = [m.start() for m in ALNUM.finditer(lowered)]
        offsets = Offsets(lowered)
        assert [offsets[k] for k in range(len(plain))] == plain
        for beyond in (len(plain), -1):
            with pytest.raises(IndexError):
                offsets[beyond]


VALUES = [
    ("EMAIL", "maria.lopez@globex.example.com"),
    ("EMAIL", "ops@example.com"),
    ("PHONE", "+49 30 1234567"),
    ("PERSON", "Kofi Annan Okafor"),
    ("IBAN", "DE44500105175407324931"),
    # Periodic: its grams occur overlapping themselves in text that repeats it.
    ("ACCOUNT", "abab-abab-abab-abab-9"),
]
NOISE = ["Order 4417 ", "shipped to Berlin. ", "\n", "  ", "GLOBEX ", "example ", "-", "Maria "]


def value_texts(count: int) -> list[str]:
    """Texts made of whole values, cuts of them (case, separators changed) and noise."""
    rng = random.Random(11)
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 40)):
            if rng.random() < 0.4:
                value = rng.choice(VALUES)[1]
                start = rng.randint(0, len(value) // 2)
                piece = value[start : rng.randint(start + 1, len(value))]
                piece = piece.upper() if rng.random() < 0.3 else piece
                parts.append(piece.replace(".", rng.choice([".", "-", " ", "_"])))
            else:
                parts.append(rng.choice(NOISE + PARTS))
        texts.append("".join(parts))
    return texts


def test_looking_only_where_a_gram_is_finds_what_the_walk_over_every_place_finds(
    monkeypatch,
) -> None:
    vault = Vault()
    source = TokenSource("crm", "list_contacts", "contacts[]")
    vault.tokens_for(VALUES, source)
    recall = Recall(vault)
    recall.refresh()
    texts = value_texts(1500)
    found = [recall.find(text) for text in texts]
    assert sum(bool(hits) for hits in found) > 500  # the texts do hold values and cuts

    def every_place(skel: str, _grams: object) -> range:
        return range(0, len(skel) - recall_module._GRAM + 1, recall_module._STRIDE)

    monkeypatch.setattr(recall_module, "_gram_places", every_place)
    assert [recall.find(text) for text in texts] == found

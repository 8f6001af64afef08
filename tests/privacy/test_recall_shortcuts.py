"""The recall's shortcuts read what the plain way reads: an ASCII skeleton made from bytes, and
the hint that any spelled-out address ("maria at globex dot com") holds."""

from __future__ import annotations

import random

from codemode.privacy.recall import _NOT_ALNUM, _SPELLED, _SPELLED_HINT, _skeleton_of

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
        assert _skeleton_of(text) == _NOT_ALNUM.sub("", text)


def test_every_spelled_out_address_holds_the_hint() -> None:
    matched = 0
    for text in random_texts(5000):
        lowered = text.lower()
        if _SPELLED.search(lowered) is not None:
            matched += 1
            assert _SPELLED_HINT.search(lowered) is not None
    assert matched > 500

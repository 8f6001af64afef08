"""The fast path stops searching a window once no further match could end inside it: that
rests on ``_shortest`` never overstating how short a match can be."""

from __future__ import annotations

import re

import pytest

from codemode.privacy.detectors import _BUILTINS
from codemode.privacy.fastscan import _shortest
from tests.privacy.test_fastscan import VALUES

PATTERNS = [d.pattern for ds in _BUILTINS.values() for d in ds]


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.pattern[:40])
def test_no_match_is_shorter_than_the_shortest_said(pattern: re.Pattern[str]) -> None:
    shortest = _shortest(pattern)
    assert shortest > 0  # known for every built-in pattern
    text = " ".join(VALUES) + " " + " ".join(value[:-1] for value in VALUES)
    assert all(len(m.group()) >= shortest for m in pattern.finditer(text))


def test_the_shortest_is_the_fewest_characters_a_pattern_takes() -> None:
    assert _shortest(re.compile(r"(?<!\w)\d{3}[ \-]\d{2}(?!\d)")) == 6
    assert _shortest(re.compile(r"a?b*")) == 0

"""``pieces._texts`` walks JSON-like data with a stack of its own: the same strings, in the same
order, as a walk that recurses, and no depth of nesting is too deep."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.privacy.pieces import _texts

LEAVES = st.one_of(
    st.text(max_size=5), st.integers(), st.floats(allow_nan=False), st.booleans(), st.none()
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers()), inner, max_size=5),
    ),
    max_leaves=40,
)


def recursive(value: Any, keys: bool, items: int | None) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield str(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            if keys and isinstance(key, str):
                yield key
            yield from recursive(item, keys, items)
    elif isinstance(value, list | tuple):
        for item in value[:items]:
            yield from recursive(item, keys, items)


@settings(max_examples=500)
@given(VALUES, st.booleans(), st.sampled_from([None, 0, 2]))
def test_the_walk_gives_what_a_recursive_walk_gives(
    value: Any, keys: bool, items: int | None
) -> None:
    assert list(_texts(value, keys=keys, items=items)) == list(recursive(value, keys, items))


def test_nesting_deeper_than_the_recursion_limit_is_walked() -> None:
    value: Any = "inside"
    for depth in range(5000):
        value = [value] if depth % 2 else {"k": value}
    assert list(_texts(value)) == ["inside"]

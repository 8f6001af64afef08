"""Queries that name functions answer with exactly those functions (how the agent asks for a
candidate of an earlier answer)."""

from __future__ import annotations

import pytest

from codemode.search.fts import FtsIndex
from codemode.search.names import names_query


@pytest.fixture
def index(stripe_specs):
    index = FtsIndex()
    index.add(stripe_specs)
    return index


def test_a_python_name_answers_with_that_function_alone(index):
    # Its words alone rank other refund operations first: the name must decide, not the words.
    assert index.search("charges charge refunds refund", 1)[0].function != "post_refunds"
    hits = index.search("stripe.post_refunds", 31)
    assert [hit.python_name for hit in hits] == ["stripe.post_refunds"]


def test_several_names_keep_their_order_and_forms(index):
    query = "servers.stripe.get_customers, stripe.post_refunds(amount=...) stripe.get_customers"
    hits = index.search(query, 31)
    assert [hit.python_name for hit in hits] == ["stripe.get_customers", "stripe.post_refunds"]
    assert [hit.python_name for hit in index.search(query, 1)] == ["stripe.get_customers"]


def test_an_unknown_name_is_searched_as_words(index):
    hits = index.search("stripe.post_refunds stripe.no_such_function", 5)
    assert len(hits) == 5  # an ordinary ranked answer, not an empty or partial one


def test_only_dotted_names_make_a_names_query():
    assert names_query("stripe.post_refunds") == 1
    assert names_query("servers.stripe.a, stripe.b; memory.c()") == 3
    assert names_query("refund a charge") == 0
    assert names_query("stripe.post_refunds please") == 0
    assert names_query("") == 0


def test_names_added_later_are_found(tiny_specs, stripe_specs):
    index = FtsIndex()
    index.add(tiny_specs)
    assert "stripe.post_refunds" not in [h.python_name for h in index.search("stripe.post_refunds")]
    index.add(stripe_specs)
    assert [h.python_name for h in index.search("stripe.post_refunds", 5)] == [
        "stripe.post_refunds"
    ]

import time

import pytest

from codemode.search.base import Hit, MemoryIndex, SearchIndex
from codemode.search.fts import FtsIndex


@pytest.fixture(scope="module")
def stripe_index(stripe_specs):
    index = FtsIndex()
    index.add(stripe_specs)
    return index


def test_indexes_satisfy_the_protocol():
    assert isinstance(FtsIndex(), SearchIndex)
    assert isinstance(MemoryIndex(), SearchIndex)


@pytest.mark.parametrize(
    ("query", "expected", "within"),
    [
        ("delete a webhook endpoint", "DeleteWebhookEndpointsWebhookEndpoint", 3),
        ("refund a charge", "PostChargesChargeRefunds", 3),
        ("list all invoices", "GetInvoices", 5),
        ("cancel a payout", "PostPayoutsPayoutCancel", 3),
        ("list apple pay domains", "GetApplePayDomains", 3),
    ],
)
def test_ranking_on_the_real_stripe_spec(stripe_index, query, expected, within):
    hits = stripe_index.search(query, within)
    assert expected in [h.operation_id for h in hits], [h.operation_id for h in hits]


def test_hits_carry_openapi_location_and_python_name(stripe_index):
    hit = stripe_index.search("cancel a payout", 1)[0]
    assert isinstance(hit, Hit)
    assert (hit.method, hit.path, hit.operation_id) == (
        "POST",
        "/v1/payouts/{payout}/cancel",
        "PostPayoutsPayoutCancel",
    )
    assert hit.python_name == "stripe.post_payouts_payout_cancel"
    assert hit.signature.startswith("post_payouts_payout_cancel(payout: str")
    assert hit.score > 0


def test_scores_descend_and_limit_holds(stripe_index):
    hits = stripe_index.search("subscription", 7)
    assert len(hits) == 7
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_queries_without_words_find_nothing(stripe_index):
    assert stripe_index.search("", 5) == []
    assert stripe_index.search("?!", 5) == []
    assert stripe_index.search('"quoted" AND OR NOT*', 5) is not None


def test_indexing_and_search_are_fast(stripe_specs, stripe_index):
    start = time.perf_counter()
    FtsIndex().add(stripe_specs)
    assert time.perf_counter() - start < 2.0
    start = time.perf_counter()
    for _ in range(20):
        stripe_index.search("update the default payment method of a customer", 5)
    assert (time.perf_counter() - start) / 20 < 0.05


def test_memory_twin_ranks_by_matching_words(tiny_specs):
    index = MemoryIndex()
    index.add(tiny_specs)
    assert index.search("remove a customer", 1)[0].tool == "deleteCustomer"
    assert index.search("nothing matches zzz", 5) == []

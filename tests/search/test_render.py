import pytest

from codemode.errors import UsageError
from codemode.search.fts import FtsIndex
from codemode.search.render import check_detail, render_answer
from codemode.tokens import count_tokens

QUERIES = [
    "create a customer",
    "refund a charge",
    "update a subscription",
    "list all invoices",
    "create a checkout session",
    "attach a payment method",
]


@pytest.fixture(scope="module")
def index(stripe_specs):
    index = FtsIndex()
    index.add(stripe_specs)
    return index


def test_name_detail_lists_importable_names(index):
    answer = render_answer(index.search("cancel a payout", 3), "name")
    lines = answer.splitlines()
    assert lines[0] == "from servers import stripe"
    assert "stripe.post_payouts_payout_cancel" in lines[1:]
    assert len(lines) == 4


def test_summary_detail_has_signature_and_first_sentence(index):
    answer = render_answer(index.search("cancel a payout", 1), "summary")
    first, signature, summary = answer.splitlines()
    assert first == "from servers import stripe"
    assert signature.startswith("stripe.post_payouts_payout_cancel(payout: str")
    assert signature.endswith("-> dict")
    assert summary.startswith("  A previously created payout can be canceled")


def test_full_detail_uses_the_stub_source(index):
    hits = index.search("create a customer", 2)
    sources = {(h.server, h.tool): f"def {h.function}():\n    '''doc'''\n" for h in hits}
    answer = render_answer(hits, "full", source=lambda s, t: sources[(s, t)])
    assert f"def {hits[0].function}():" in answer
    assert f"# {hits[1].python_name}" in answer


def test_default_answer_fits_the_token_budget(index):
    for query in QUERIES:
        answer = render_answer(index.search(query))
        assert count_tokens(answer) <= 600, (query, count_tokens(answer))


def test_no_hits_says_what_to_do():
    assert "Try other words" in render_answer([])


def test_unknown_detail_is_a_usage_error():
    assert check_detail("full") == "full"
    with pytest.raises(UsageError, match="name, summary, full"):
        check_detail("everything")


def test_python_names_match_the_generated_stubs(tiny_specs):
    from codemode.stubs import StubLibrary

    library = StubLibrary(tiny_specs)
    index = FtsIndex()
    index.add(tiny_specs)
    hits = index.search("customer charge invoices", 10)
    assert len(hits) == len(tiny_specs)
    for hit in hits:
        assert hit.python_name == library.python_name(hit.server, hit.tool)
    answer = render_answer(hits[:1], "full", source=library.tool_source)
    assert f"def {hits[0].function}(" in answer


def test_answers_over_the_three_real_specs_fit_the_token_budget(real_specs):
    # Long server names (one module per spec) are the worst case for the answer's size.
    index = FtsIndex()
    for specs in real_specs.values():
        index.add(specs)
    queries = [*QUERIES, "create a dns record", "merge a pull request", "list workflow runs"]
    queries += ["upload a worker script", "add a collaborator to a repository"]
    for query in queries:
        answer = render_answer(index.search(query))
        assert count_tokens(answer) <= 600, (query, count_tokens(answer))

import statistics

import pytest

from codemode.errors import UsageError
from codemode.search.fts import FtsIndex
from codemode.search.render import (
    DEFAULT_HEAD,
    DEFAULT_TAIL,
    PART_TOKENS,
    answer_head,
    answer_size,
    check_detail,
    check_part,
    render_answer,
    source_parts,
)
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


def default_answer(index, query, **options):
    """The answer the gateway gives at the defaults (``SearchMixin.search``)."""
    hits = index.search(query, answer_size(query, "summary", DEFAULT_HEAD))
    return render_answer(hits, head=answer_head(query, hits, DEFAULT_HEAD), **options)


def test_top_five_with_signatures_fit_the_token_budget(index):
    for query in QUERIES:
        answer = render_answer(index.search(query))
        assert count_tokens(answer) <= 600, (query, count_tokens(answer))


def test_default_answer_shows_a_few_signatures_then_a_tail_of_names(index):
    hits = index.search("refund a charge", DEFAULT_HEAD + DEFAULT_TAIL)
    lines = default_answer(index, "refund a charge").splitlines()
    assert lines[0] == "from servers import stripe"
    # The head: signature and summary per hit.
    for number, hit in enumerate(hits[:DEFAULT_HEAD]):
        assert lines[1 + 2 * number] == f"stripe.{hit.signature}"
        assert lines[2 + 2 * number] == f"  {hit.summary}"
    # The tail: the next hits by name, grouped by module, in rank order.
    assert lines[1 + 2 * DEFAULT_HEAD].startswith("More candidates (search(")
    assert lines[2 + 2 * DEFAULT_HEAD :] == [
        "stripe: " + ", ".join(hit.function for hit in hits[DEFAULT_HEAD:])
    ]
    assert len(hits) == DEFAULT_HEAD + DEFAULT_TAIL


def test_the_tail_groups_names_by_module_in_rank_order(index, real_specs):
    combined = FtsIndex()
    for specs in real_specs.values():
        combined.add(specs)
    hits = combined.search("list all", DEFAULT_HEAD + DEFAULT_TAIL)
    tail = default_answer(combined, "list all").split("More candidates")[1].splitlines()[1:]
    modules = list(dict.fromkeys(hit.module for hit in hits[DEFAULT_HEAD:]))
    assert len(modules) > 1, "the query should reach several specs"
    assert [line.split(":")[0] for line in tail] == modules
    for module, line in zip(modules, tail, strict=True):
        functions = [hit.function for hit in hits[DEFAULT_HEAD:] if hit.module == module]
        assert line == f"{module}: {', '.join(functions)}"


def test_a_named_candidate_is_shown_alone_with_its_signature(index):
    name = index.search("refund a charge", DEFAULT_HEAD + DEFAULT_TAIL)[-1].python_name
    lines = default_answer(index, name).splitlines()
    assert lines[1].startswith(f"{name}(")
    assert len(lines) == 3  # header, signature, summary: no tail


def test_default_answer_fits_the_token_budget(index):
    for query in QUERIES:
        answer = default_answer(index, query)
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
    # Long server names (one module per spec) are the worst case for the answer's size. The
    # default answer now names DEFAULT_HEAD + DEFAULT_TAIL functions (the top 5 did before):
    # each stays under the old cap of 600 tokens, their median under 400.
    index = FtsIndex()
    for specs in real_specs.values():
        index.add(specs)
    queries = [*QUERIES, "create a dns record", "merge a pull request", "list workflow runs"]
    queries += ["upload a worker script", "add a collaborator to a repository"]
    sizes = []
    for query in queries:
        answer = default_answer(index, query)
        sizes.append(count_tokens(answer))
        assert sizes[-1] <= 600, (query, sizes[-1])
        assert count_tokens(render_answer(index.search(query))) <= 600
    assert statistics.median(sizes) <= 400, sizes


def test_full_detail_cuts_a_long_function_into_parts(stripe_specs):
    from codemode.stubs import StubLibrary

    library = StubLibrary(stripe_specs)
    index = FtsIndex()
    index.add(stripe_specs)
    [hit] = index.search("stripe.post_refunds", 5)
    whole = library.tool_source(hit.server, hit.tool)
    assert count_tokens(whole) > 800
    first = render_answer([hit], "full", source=library.tool_source)
    assert count_tokens(first) <= 800
    # The function first (signature and docstring), then the types it uses.
    assert "\ndef post_refunds(" in first and "Args:" in first
    assert "\nclass " not in first.split("\ndef post_refunds(")[0]
    assert "\ndef post_refunds(" not in whole.split("\nclass ")[0]  # not so in the stub
    pointer = 'search("stripe.post_refunds", detail="full", part=2) shows the rest'
    total = int(first.rsplit("(part 1 of ", 1)[1].split(")")[0])
    assert total > 1 and first.endswith(f"(part 1 of {total}): {pointer}")
    texts = []
    for part in range(1, total + 1):
        answer = render_answer([hit], "full", source=library.tool_source, part=part)
        assert count_tokens(answer) <= 800, part
        body = answer.split("\n", 2)[2]  # after the import line and the "# name" line
        texts.append(body.split("\n# … cut here")[0])

    # Every line of the stub is in exactly one part (blank lines aside: the order changed).
    def lines(text):
        return sorted(line for line in text.splitlines() if line.strip())

    assert lines("\n".join(texts)) == lines(whole)
    assert not render_answer([hit], "full", source=library.tool_source, part=total).count(
        "cut here"
    )
    beyond = render_answer([hit], "full", source=library.tool_source, part=total + 1)
    assert f"has {total} part(s); part {total + 1} does not exist" in beyond


def test_parts_respect_the_budget_even_for_one_huge_line():
    text = "short line\n" + "word " * 3000 + "\nlast line"
    parts = source_parts(text, budget=200)
    assert all(count_tokens(part) <= 200 + 5 for part in parts)
    assert "".join(part.replace("\n", "") for part in parts) == text.replace("\n", "")
    assert source_parts("") == [""]
    assert PART_TOKENS <= 800


def test_part_must_be_a_positive_integer():
    assert check_part(2) == 2
    for wrong in (0, -1, True, "2", 1.5):
        with pytest.raises(UsageError, match="part=2"):
            check_part(wrong)


def test_a_server_named_like_a_standard_module_is_shown_as_code_imports_it():
    from codemode.tools import ToolSpec

    schema = {
        "type": "object",
        "properties": {"timezone": {"type": "string"}},
        "required": ["timezone"],
    }
    specs = [
        ToolSpec(
            server="time",
            name="get_current_time",
            description="Now in a zone.",
            input_schema=schema,
        ),
        ToolSpec(
            server="time", name="convert_time", description="Convert a time.", input_schema=schema
        ),
        ToolSpec(
            server="crm",
            name="find_lead",
            description="Find a lead by time zone.",
            input_schema=schema,
        ),
    ]
    small = FtsIndex()
    small.add(specs)
    hits = small.search("time zone", 3)
    answer = render_answer(hits, head=1)
    header, *rest = answer.splitlines()
    modules = dict.fromkeys(h.module for h in hits)
    assert header == "from servers import " + ", ".join(
        "time as time_server" if m == "time" else m for m in modules
    )
    assert {"time", "crm"} <= set(modules)
    assert not any(line.startswith(("time.", "time:")) for line in rest)
    assert any(line.startswith("time_server") for line in rest)
    # The name as code calls it finds the function too.
    assert [h.function for h in small.search("time_server.convert_time", 5)] == ["convert_time"]

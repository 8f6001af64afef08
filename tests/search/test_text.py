from codemode.search.text import expand_query, split_words, stem, terms


def test_split_words_handles_identifiers_and_markup():
    assert split_words("listRepoIssues") == ["list", "repo", "issues"]
    assert split_words("get-a_thing HTTPServer") == ["get", "a", "thing", "http", "server"]
    assert split_words("<p>Retrieves the <a href='x'>charge</a></p>") == [
        "retrieves",
        "the",
        "charge",
    ]


def test_stem_joins_inflections():
    assert stem("created") == stem("create") == stem("creating")
    assert stem("policies") == stem("policy")
    assert stem("charges") == stem("charge")
    assert stem("tagged") == stem("tag")
    assert stem("status") == "status"


def test_terms_drop_stopwords_only_when_asked():
    assert "the" in terms("the charge")
    assert "the" not in terms("the charge", drop_stopwords=True)


def test_expand_query_brings_synonyms_once():
    expanded = dict(expand_query("remove remove the member"))
    assert set(expanded) == {stem("remove"), stem("member")}
    assert stem("delete") in expanded[stem("remove")]

import pytest

from codemode.errors import UsageError
from codemode.search import semantic
from codemode.search.documents import tool_documents
from codemode.search.encoder import MiniLMEncoder
from codemode.search.fts import FtsIndex
from codemode.search.semantic import HybridIndex, open_stored_index, save_index, vectors_key
from codemode.search.store import catalog_fingerprint

pytestmark = pytest.mark.needs_model


class CountingEncoder:
    """The real encoder, counting how many texts it embeds."""

    def __init__(self, inner):
        self.inner = inner
        self.max_length = inner.max_length
        self.variant = inner.variant
        self.document_precision = inner.document_precision
        self.dimension = inner.dimension
        self.texts = 0

    def encode(self, texts, **kwargs):
        self.texts += len(texts)
        return self.inner.encode(texts, **kwargs)

    def encode_documents(self, texts, **kwargs):
        self.texts += len(texts)
        return self.inner.encode_documents(texts, **kwargs)

    def encode_query(self, text):
        self.texts += 1
        return self.inner.encode_query(text)

    def blas_threads(self):
        return self.inner.blas_threads()

    def release_documents_session(self):
        self.inner.release_documents_session()


@pytest.fixture(scope="module")
def encoder():
    return MiniLMEncoder(max_length=96)


@pytest.fixture(scope="module")
def subset(stripe_specs):
    wanted = ("Refund", "Customers", "Subscription", "Payout", "WebhookEndpoint")
    return [s for s in stripe_specs if any(w in s.name for w in wanted)][:60]


def test_hybrid_finds_paraphrased_tasks(subset, encoder, tmp_path):
    index = HybridIndex(encoder=encoder, cache_dir=tmp_path)
    index.add(subset)
    top = [h.operation_id for h in index.search("give a customer their money back", 5)]
    assert {"PostRefunds", "PostChargesChargeRefund", "PostChargesChargeRefunds"} & set(top)
    top = [h.operation_id for h in index.search("create a customer", 3)]
    assert "PostCustomers" in top
    top = [h.operation_id for h in index.search("stop someone's monthly membership", 5)]
    cancels = {
        "DeleteSubscriptionsSubscriptionExposedId",
        "DeleteCustomersCustomerSubscriptionsSubscriptionExposedId",
    }
    assert cancels & set(top)


def test_embeddings_are_cached_on_disk(subset, encoder, tmp_path):
    first = CountingEncoder(encoder)
    HybridIndex(encoder=first, cache_dir=tmp_path).add(subset)
    assert len(tool_documents(subset[:1])[0].semantic_texts) == 2
    views = len(semantic.DEFAULT_VIEWS)
    assert first.texts == views * len(subset)
    assert len(list((tmp_path / "embeddings").glob("*.npy"))) == views

    second = CountingEncoder(encoder)
    index = HybridIndex(encoder=second, cache_dir=tmp_path)
    index.add(subset)
    assert second.texts == 0
    assert index.search("refund", 1)
    # A changed document is a different cache entry.
    third = CountingEncoder(encoder)
    HybridIndex(encoder=third, cache_dir=tmp_path).add(subset[:-1])
    assert third.texts == views * (len(subset) - 1)


def test_query_embeddings_are_kept_in_a_bounded_lru(subset, encoder, tmp_path, monkeypatch):
    counting = CountingEncoder(encoder)
    index = HybridIndex(encoder=counting, cache_dir=tmp_path)
    index.add(subset)
    counting.texts = 0
    first = index.search("refund a charge", 3)
    assert index.search("refund a charge", 3) == first
    assert counting.texts == 1
    monkeypatch.setattr(semantic, "QUERY_CACHE_SIZE", 2)
    for query in ("a customer", "a payout", "a webhook"):
        index.search(query, 1)
    assert counting.texts == 4
    index.search("refund a charge", 1)  # pushed out by the three newer queries
    assert counting.texts == 5
    index.forget_queries()
    index.search("a webhook", 1)
    assert counting.texts == 6


def test_group_mean_is_mixed_into_each_tool_vector(subset, encoder, tmp_path, np):
    alone = HybridIndex(encoder=encoder, cache_dir=tmp_path, group_weight=0.0)
    alone.add(subset)
    mixed = HybridIndex(encoder=encoder, cache_dir=tmp_path, group_weight=0.5)
    mixed.add(subset)
    documents = alone.documents
    rows = [i for i, d in enumerate(documents) if d.group == documents[0].group]
    assert len(rows) > 1
    centroid = alone._vectors[rows].mean(axis=0)
    centroid /= np.linalg.norm(centroid)
    expected = (alone._vectors[rows[0]] + 0.5 * centroid) / 1.5
    assert np.allclose(mixed._vectors[rows[0]], expected, atol=1e-6)
    assert mixed._vectors.dtype == np.float32
    assert mixed._vectors.flags["C_CONTIGUOUS"]


def test_scores_blend_both_signals(subset, encoder, tmp_path, np):
    index = HybridIndex(encoder=encoder, cache_dir=tmp_path, alpha=1.0)
    index.add(subset)
    lexical = FtsIndex()
    lexical.add(subset)
    query = "update a customer"
    assert [h.tool for h in index.search(query, 3)] == [h.tool for h in lexical.search(query, 3)]
    index.alpha = 0.0
    scores = index.scores(query)
    best = max(scores, key=scores.__getitem__)
    cosine = index._vectors @ encoder.encode_query(query)
    assert best == int(np.argmax(cosine))


def test_a_python_name_answers_with_that_function_alone(subset, encoder, tmp_path):
    index = HybridIndex(encoder=encoder, cache_dir=tmp_path)
    index.add(subset)
    name = index.search("give a customer their money back", 10)[-1].python_name
    assert [hit.python_name for hit in index.search(name, 31)] == [name]


def test_the_index_embeds_only_its_views(subset, encoder, tmp_path, np):
    documents = tool_documents(subset)
    seen: list[str] = []

    class Recording(CountingEncoder):
        def encode_documents(self, texts, **kwargs):
            seen.extend(texts)
            return super().encode_documents(texts, **kwargs)

    prose = HybridIndex(
        encoder=Recording(encoder), cache_dir=tmp_path, group_weight=0.0, views=(1,)
    )
    prose.add(subset)
    assert prose.views == semantic.FIRST_VIEWS == (1,)
    assert sorted(seen) == sorted(d.semantic_texts[1] for d in documents)
    both = HybridIndex(encoder=encoder, cache_dir=tmp_path, group_weight=0.0, views=(0, 1))
    both.add(subset)
    first = HybridIndex(encoder=encoder, cache_dir=tmp_path, group_weight=0.0, views=(0,))
    first.add(subset)
    assert np.allclose(both.vectors, (first.vectors + prose.vectors) / 2, atol=1e-6)
    assert not np.allclose(both.vectors, prose.vectors, atol=1e-3)


def test_an_index_needs_a_view(encoder, tmp_path):
    with pytest.raises(UsageError, match="at least one embedded view"):
        HybridIndex(encoder=encoder, cache_dir=tmp_path, views=())


def test_stored_vectors_name_their_views(subset, encoder, tmp_path, np):
    # Vectors averaged over other views are other vectors: a store written with two views (the
    # default before) must not be read as the one-view index, nor the other way round.
    assert vectors_key("m", (0, 1)) != vectors_key("m", (1,)) != vectors_key("m", (0,))
    assert vectors_key("m", (1,)).startswith("m-")
    assert vectors_key("m", (1,)) != vectors_key("other", (1,))
    fingerprint = catalog_fingerprint(subset)
    two = HybridIndex(encoder=encoder, cache_dir=tmp_path, views=(0, 1))
    two.add(subset)
    save_index(two, fingerprint, tmp_path)
    assert (
        open_stored_index(
            fingerprint, semantic=True, cache_dir=tmp_path, encoder=encoder, views=(1,)
        )
        is None
    )
    stored = open_stored_index(
        fingerprint, semantic=True, cache_dir=tmp_path, encoder=encoder, views=(0, 1)
    )
    assert isinstance(stored, HybridIndex) and np.array_equal(stored.vectors, two.vectors)
    one = HybridIndex(encoder=encoder, cache_dir=tmp_path, views=(1,))
    one.add(subset)
    save_index(one, fingerprint, tmp_path)
    again = open_stored_index(
        fingerprint, semantic=True, cache_dir=tmp_path, encoder=encoder, views=(1,)
    )
    assert isinstance(again, HybridIndex) and again.views == (1,)
    assert np.array_equal(again.vectors, one.vectors)
    assert not np.allclose(again.vectors, two.vectors, atol=1e-3)

"""Tool texts on 8-bit arithmetic (``search/int8_documents.py``): close to the float32 vectors,
stored under keys of their own (a float32 cache is never mixed with them, either way), small
files written once, and float32 whenever the 8-bit graph cannot run.

Where ``make test`` runs (``CODEMODE_EXPECT_MODEL=1``) a missing onnxruntime fails these tests
rather than skipping them.
"""

import logging

import pytest

from codemode.search import onnx_backend
from codemode.search.documents import tool_documents
from codemode.search.encoder import MiniLMEncoder
from codemode.search.int8_documents import DOCUMENTS_FILE, DOCUMENTS_GRAPH_FILE
from codemode.search.keys import model_key
from codemode.search.semantic import HybridIndex, build_stages, open_stored_index
from codemode.search.store import catalog_fingerprint

pytestmark = [pytest.mark.needs_model, pytest.mark.usefixtures("require_onnxruntime")]

TEXTS = [
    "give a customer their money back",
    "hi",
    "Create a refund. Refund a charge that has previously been created but not yet refunded.",
    "stripe post refunds refunds create refund amount charge currency customer",
]
# Measured over the three specs' 6,448 tool texts: median 0.9945, min 0.973 (one activation
# scale per batch; docs/search.md).
MIN_COSINE = 0.97


@pytest.fixture(scope="module")
def int8_encoder(model_cache):
    return MiniLMEncoder(max_length=96, cache_dir=model_cache)


@pytest.fixture(scope="module")
def float32_encoder(model_cache):
    return MiniLMEncoder(max_length=96, cache_dir=model_cache, document_precision="float32")


class Counting:
    """Counts the tool texts an encoder embeds."""

    def __init__(self, monkeypatch):
        self.texts = 0
        embed = MiniLMEncoder.encode_documents

        def counting(encoder, texts, **kwargs):
            self.texts += len(texts)
            return embed(encoder, texts, **kwargs)

        monkeypatch.setattr(MiniLMEncoder, "encode_documents", counting)


def test_int8_tool_vectors_are_close_to_the_float32_ones_and_not_equal(
    int8_encoder, float32_encoder, np
):
    assert (int8_encoder.document_precision, float32_encoder.document_precision) == (
        "int8",
        "float32",
    )
    # one batch on one thread, and many batches on the build's two threads
    for texts in (TEXTS, [f"{text} number {n}" for n in range(12) for text in TEXTS]):
        low = int8_encoder.encode_documents(texts)
        full = float32_encoder.encode_documents(texts)
        assert low.shape == full.shape == (len(texts), 384)
        assert (low * full).sum(axis=1).min() > MIN_COSINE
        assert np.abs(np.linalg.norm(low, axis=1) - 1).max() < 1e-5
        assert np.abs(low - full).max() > 1e-4  # really 8-bit arithmetic
        assert np.abs(full - float32_encoder.encode(texts)).max() < 1e-6


def test_the_precision_names_the_stored_vectors(model_cache, int8_encoder, float32_encoder):
    numpy_encoder = MiniLMEncoder(max_length=96, cache_dir=model_cache, backend="numpy")
    assert numpy_encoder.document_precision == "float32"  # numpy has no 8-bit path
    # float32 keys are the ones stored before: those caches stay valid
    assert model_key(float32_encoder) == model_key(numpy_encoder) == "all-MiniLM-L6-v2-96"
    assert model_key(int8_encoder) == "all-MiniLM-L6-v2-96-int8v1"


def test_a_float32_cache_is_never_mixed_with_int8_vectors(
    tmp_path, stripe_specs, int8_encoder, float32_encoder, monkeypatch, np
):
    documents = tool_documents(stripe_specs[:40])
    counting = Counting(monkeypatch)

    def index(encoder, directory):
        made = HybridIndex(encoder=encoder, cache_dir=directory)
        made.add_documents(documents)
        return made.vectors

    shared = tmp_path / "shared"
    float32 = index(float32_encoder, shared)
    assert counting.texts == 2 * len(documents)  # both views
    int8 = index(int8_encoder, shared)
    assert counting.texts == 4 * len(documents)  # the float32 entries were not read
    assert np.array_equal(int8, index(int8_encoder, tmp_path / "int8 alone"))
    assert np.abs(int8 - float32).max() > 1e-4
    # and the other way: the int8 entries are not read for float32 either
    counting.texts = 0
    assert np.array_equal(index(float32_encoder, shared), float32)
    assert np.array_equal(index(int8_encoder, shared), int8)
    assert counting.texts == 0  # each read back its own
    names = {path.name.rsplit("-", 1)[0] for path in (shared / "embeddings").iterdir()}
    assert names == {model_key(float32_encoder), model_key(int8_encoder)}


def test_an_index_stored_in_float32_is_a_miss_for_an_8_bit_encoder(
    tmp_path, tiny_specs, float32_encoder, int8_encoder, monkeypatch, np
):
    from codemode.search.fts import FtsIndex
    from codemode.search.semantic import build_index

    documents = tool_documents(tiny_specs)
    fingerprint = catalog_fingerprint(tiny_specs)
    lexical = FtsIndex()
    lexical.add_documents(documents)
    cache = tmp_path / "cache"
    stored = build_stages(
        documents, lexical, cache_dir=cache, fingerprint=fingerprint, factory=_with(float32_encoder)
    )
    # what an older version stored: read by a float32 encoder only
    again = open_stored_index(fingerprint, semantic=True, cache_dir=cache, encoder=float32_encoder)
    assert isinstance(again, HybridIndex) and np.array_equal(again.vectors, stored.vectors)
    assert (
        open_stored_index(fingerprint, semantic=True, cache_dir=cache, encoder=int8_encoder) is None
    )
    assert open_stored_index(fingerprint, semantic=True, cache_dir=cache) is None
    # so a build embeds again, in 8 bits, and stores that beside it
    counting = Counting(monkeypatch)
    built = build_index(tiny_specs, semantic=True, cache_dir=cache)
    assert isinstance(built, HybridIndex) and built.encoder.document_precision == "int8"
    assert counting.texts == 2 * len(documents)
    assert np.abs(built.vectors - stored.vectors).max() > 1e-4
    opened = open_stored_index(fingerprint, semantic=True, cache_dir=cache)
    assert isinstance(opened, HybridIndex) and np.array_equal(opened.vectors, built.vectors)


def _with(encoder):
    def factory(**kwargs):
        kwargs["encoder"] = encoder
        return HybridIndex(**kwargs)

    return factory


def test_the_documents_files_are_small_written_once_and_point_into_the_weights(
    model_cache, int8_encoder, prepared_dir
):
    import onnx

    int8_encoder.encode_documents(TEXTS[:1])
    prepared = prepared_dir(model_cache)
    graph, weights = prepared / DOCUMENTS_GRAPH_FILE, prepared / DOCUMENTS_FILE
    stamps = (graph.stat().st_mtime_ns, weights.stat().st_mtime_ns)
    MiniLMEncoder(max_length=96, cache_dir=model_cache).encode_documents(TEXTS[:1])
    assert (graph.stat().st_mtime_ns, weights.stat().st_mtime_ns) == stamps
    assert not list(prepared.glob("*.tmp"))
    assert weights.stat().st_size < 11_000_000  # 8-bit codes and a scale per column
    assert graph.stat().st_size < 100_000
    model = onnx.load(str(graph), load_external_data=False)
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            location = {entry.key: entry.value for entry in tensor.external_data}["location"]
            assert location in {"weights.npy", DOCUMENTS_FILE}
        else:
            assert len(tensor.raw_data) < 1024, tensor.name
    kinds = [node.op_type for node in model.graph.node]
    assert kinds.count("DynamicQuantizeMatMul") == 4 * 6 and "MatMul" in kinds  # attention


def test_a_graph_that_fails_embeds_in_float32_with_one_warning(
    model_cache, float32_encoder, fresh_onnx_warnings, caplog, monkeypatch, np
):
    encoder = MiniLMEncoder(max_length=96, cache_dir=model_cache)
    before = model_key(encoder)

    def broken(*args, **kwargs):
        raise RuntimeError("no such operator")

    monkeypatch.setattr(onnx_backend, "start_documents_int8", broken)
    with caplog.at_level(logging.WARNING, logger="codemode.search"):
        vectors = encoder.encode_documents(TEXTS)
        encoder.encode_documents(TEXTS)
    assert encoder.document_precision == "float32" and model_key(encoder) != before
    assert np.abs(vectors - float32_encoder.encode_documents(TEXTS)).max() < 1e-5
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "no such operator" in warnings[0] and "document_precision='float32'" in warnings[0]


def test_a_graph_that_fails_during_a_build_leaves_an_index_of_float32_alone(
    tmp_path,
    stripe_specs,
    tiny_specs,
    float32_encoder,
    model_cache,
    fresh_onnx_warnings,
    monkeypatch,
    np,
):
    # two servers: the first is embedded in 8 bits before the graph fails on the second
    specs = stripe_specs[:20] + tiny_specs
    documents = tool_documents(specs)
    encoder = MiniLMEncoder(max_length=96, cache_dir=model_cache)
    start = onnx_backend.start_documents_int8
    calls = []

    def failing_later(*args, **kwargs):
        calls.append(1)
        if len(calls) > 2:
            raise RuntimeError("session lost")
        return start(*args, **kwargs)

    monkeypatch.setattr(onnx_backend, "start_documents_int8", failing_later)
    index = HybridIndex(encoder=encoder, cache_dir=tmp_path / "build")
    index.add_documents(documents)
    assert len(calls) == 3 and encoder.document_precision == "float32"
    expected = HybridIndex(encoder=float32_encoder, cache_dir=tmp_path / "float32")
    expected.add_documents(documents)
    assert np.abs(index.vectors - expected.vectors).max() < 1e-5
    # the 8-bit entries made before the failure stay under their own key
    stored = {path.name.rsplit("-", 1)[0] for path in (tmp_path / "build" / "embeddings").iterdir()}
    assert stored == {model_key(float32_encoder), "all-MiniLM-L6-v2-96-int8v1"}


def test_a_failing_progress_callback_is_not_taken_for_a_failing_graph(model_cache):
    encoder = MiniLMEncoder(max_length=96, cache_dir=model_cache)
    texts = [f"{text} number {n}" for n in range(12) for text in TEXTS]

    class Stopped(Exception):
        pass

    def stop_later(done, total):
        if done == total:
            raise Stopped

    with pytest.raises(Stopped):
        encoder.encode_documents(texts, progress=stop_later)
    assert encoder.document_precision == "int8"

"""Queries on 8-bit weights (``search/int8.py``): close to the float32 vectors, ``encode`` still
float32, small files written once, and float32 whenever the 8-bit graph cannot run. (Tool texts
on their own 8-bit graph: test_int8_documents.py.)

Where ``make test`` runs (``CODEMODE_EXPECT_MODEL=1``) a missing onnxruntime fails these tests
rather than skipping them.
"""

import json
import logging
from pathlib import Path

import pytest

from codemode.errors import UsageError
from codemode.search import onnx_backend
from codemode.search.encoder import MiniLMEncoder
from codemode.search.int8 import INT8_FILE, INT8_GRAPH_FILE

pytestmark = [pytest.mark.needs_model, pytest.mark.usefixtures("require_onnxruntime")]

TEXTS = [
    "give a customer their money back",
    "hi",
    "list every open pull request in the repository that was created by a specific user and "
    "has a failing status check on the default branch",
    "Create a refund. Refund a charge that has previously been created but not yet refunded.",
]

DEV = Path(__file__).resolve().parents[2] / "benchmarks" / "search_dev.json"
# Measured over the benchmark's 334 queries: at least 0.998, median 0.999 (docs/search.md).
MIN_COSINE = 0.995


@pytest.fixture(scope="module")
def int8_encoder(model_cache):
    return MiniLMEncoder(max_length=96, cache_dir=model_cache)


@pytest.fixture(scope="module")
def float32_encoder(model_cache):
    return MiniLMEncoder(max_length=96, cache_dir=model_cache, query_precision="float32")


def queries():
    tasks = json.loads(DEV.read_text())["tasks"]
    return [task["query"] for task in tasks[:40]] + TEXTS[:3]


def test_int8_query_vectors_are_close_to_the_float32_ones(int8_encoder, float32_encoder, np):
    assert (int8_encoder.query_precision, float32_encoder.query_precision) == ("int8", "float32")
    assert int8_encoder.backend == float32_encoder.backend == "onnx"
    low = np.stack([int8_encoder.encode_query(q) for q in queries()])
    full = np.stack([float32_encoder.encode_query(q) for q in queries()])
    assert low.shape == full.shape == (len(queries()), 384)
    cosines = (low * full).sum(axis=1)
    assert cosines.min() > MIN_COSINE
    assert np.abs(np.linalg.norm(low, axis=1) - 1).max() < 1e-5
    # really the 8-bit weights: float32 ones agree within 1e-5 (test_onnx_backend.py)
    assert np.abs(low - full).max() > 1e-4


def test_float32_queries_and_all_tool_texts_are_the_float32_pass(
    model_cache, int8_encoder, float32_encoder, np
):
    numpy_encoder = MiniLMEncoder(max_length=96, cache_dir=model_cache, backend="numpy")
    expected = numpy_encoder.encode(TEXTS)
    # encode stays float32 whatever the query precision (tool texts: encode_documents)
    assert np.abs(int8_encoder.encode(TEXTS) - expected).max() < 1e-5
    assert np.abs(float32_encoder.encode_query(TEXTS[0]) - expected[0]).max() < 1e-5
    # numpy has no 8-bit path: its queries are float32
    assert numpy_encoder.query_precision == "float32"
    assert np.abs(numpy_encoder.encode_query(TEXTS[0]) - expected[0]).max() < 1e-6


def test_the_int8_files_are_small_written_once_and_point_into_the_weights(
    model_cache, int8_encoder, prepared_dir
):
    import onnx

    prepared = prepared_dir(model_cache)
    graph, weights = prepared / INT8_GRAPH_FILE, prepared / INT8_FILE
    stamps = (graph.stat().st_mtime_ns, weights.stat().st_mtime_ns)
    assert MiniLMEncoder(max_length=96, cache_dir=model_cache).query_precision == "int8"
    assert (graph.stat().st_mtime_ns, weights.stat().st_mtime_ns) == stamps
    assert not list(prepared.glob("*.tmp"))
    # 11 MB of 8-bit weights and a graph of kilobytes; nothing else was written there
    assert weights.stat().st_size < 12_000_000
    assert graph.stat().st_size < 100_000
    names = {path.name for path in prepared.iterdir()}
    assert names == {"done", "layout.json", "weights.npy", "minilm-v2.onnx", graph.name, INT8_FILE}
    # every large initializer is external data in one of the two weight files, none copied
    model = onnx.load(str(graph), load_external_data=False)
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            location = {entry.key: entry.value for entry in tensor.external_data}["location"]
            assert location in {"weights.npy", INT8_FILE}
        else:
            assert len(tensor.raw_data) < 1024, tensor.name
    assert any(node.op_type == "MatMulNBits" for node in model.graph.node)


def test_a_process_that_only_embeds_queries_never_starts_the_float32_session(
    model_cache, int8_encoder, monkeypatch
):
    started = []

    class RecordingForward(onnx_backend.OnnxForward):
        def __init__(self, path, *, threads):
            started.append(path.name)
            super().__init__(path, threads=threads)

    monkeypatch.setattr(onnx_backend, "OnnxForward", RecordingForward)
    encoder = MiniLMEncoder(max_length=96, cache_dir=model_cache)
    encoder.encode_query("give a customer their money back")
    assert started == [INT8_GRAPH_FILE]
    assert encoder.backend == "onnx"
    encoder.encode(TEXTS[:2])  # tool texts: now the float32 graph starts
    assert started == [INT8_GRAPH_FILE, "minilm-v2.onnx"]


def test_an_int8_graph_that_does_not_load_means_float32_queries_with_one_warning(
    tmp_path, float32_encoder, fresh_onnx_warnings, caplog, np, prepared_dir
):
    MiniLMEncoder(max_length=96, cache_dir=tmp_path)  # prepares both graphs
    (prepared_dir(tmp_path) / INT8_GRAPH_FILE).write_bytes(b"not an onnx model")
    with caplog.at_level(logging.WARNING, logger="codemode.search"):
        first = MiniLMEncoder(max_length=96, cache_dir=tmp_path)
        second = MiniLMEncoder(max_length=96, cache_dir=tmp_path, backend="onnx")
    assert (first.query_precision, second.query_precision) == ("float32", "float32")
    assert (first.backend, second.backend) == ("onnx", "onnx")
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "int8 query graph could not start" in warnings[0]
    assert "query_precision='float32'" in warnings[0]
    query = "give a customer their money back"
    assert np.abs(first.encode_query(query) - float32_encoder.encode_query(query)).max() < 1e-5


def test_a_failing_int8_run_answers_in_float32(
    model_cache, float32_encoder, fresh_onnx_warnings, caplog, np
):
    broken = MiniLMEncoder(max_length=96, cache_dir=model_cache)

    def fail(token_ids, mask):
        raise RuntimeError("session lost")

    broken._query_onnx = fail
    query = "give a customer their money back"
    with caplog.at_level(logging.WARNING, logger="codemode.search"):
        vector = broken.encode_query(query)
    assert broken.query_precision == "float32"
    assert any("session lost" in r.getMessage() for r in caplog.records)
    assert np.abs(vector - float32_encoder.encode_query(query)).max() < 1e-5


def test_a_float32_graph_that_fails_later_leaves_tool_texts_to_numpy(
    tmp_path, fresh_onnx_warnings, caplog, np, prepared_dir
):
    MiniLMEncoder(max_length=96, cache_dir=tmp_path)
    (prepared_dir(tmp_path) / "minilm-v2.onnx").write_bytes(b"not an onnx model")
    encoder = MiniLMEncoder(max_length=96, cache_dir=tmp_path)
    assert encoder.query_precision == "int8"  # its graph does not need the float32 one
    with caplog.at_level(logging.WARNING, logger="codemode.search"):
        vectors = encoder.encode(TEXTS)
    assert encoder.backend == "numpy"
    assert any("embedding with numpy" in r.getMessage() for r in caplog.records)
    numpy_encoder = MiniLMEncoder(max_length=96, cache_dir=tmp_path, backend="numpy")
    assert np.abs(vectors - numpy_encoder.encode(TEXTS)).max() < 1e-5
    # backend="onnx" checks the float32 graph at once
    with pytest.raises(UsageError, match="could not start"):
        MiniLMEncoder(max_length=96, cache_dir=tmp_path, backend="onnx")


def test_without_a_cache_queries_are_float32_on_numpy_and_nothing_is_said(
    fresh_onnx_warnings, caplog
):
    with caplog.at_level(logging.WARNING, logger="codemode.search"):
        encoder = MiniLMEncoder(max_length=96)
    assert (encoder.backend, encoder.query_precision) == ("numpy", "float32")
    assert not caplog.records


def test_an_unknown_query_precision_is_refused():
    with pytest.raises(UsageError, match="unknown query precision 'int4'"):
        MiniLMEncoder(query_precision="int4")  # type: ignore[arg-type]


@pytest.fixture
def live_sessions(monkeypatch):
    """The graph file of every ONNX Runtime session started from now on and still alive."""
    import gc
    import weakref

    alive = weakref.WeakValueDictionary()

    class RecordingForward(onnx_backend.OnnxForward):
        def __init__(self, path, *, threads):
            super().__init__(path, threads=threads)
            alive[id(self)] = self

    monkeypatch.setattr(onnx_backend, "OnnxForward", RecordingForward)

    def names():
        gc.collect()
        return sorted(session.path.name for session in alive.values())

    return names


def test_an_index_build_stops_the_float32_session_and_queries_stay_int8(
    model_cache, stripe_specs, live_sessions, np
):
    from codemode.search.documents import tool_documents
    from codemode.search.semantic import HybridIndex

    encoder = MiniLMEncoder(max_length=96, cache_dir=model_cache)
    # Few texts (the one-thread pass) and many (a build-sized call on batch_threads).
    for specs in (stripe_specs[:3], stripe_specs[:80]):
        index = HybridIndex(encoder=encoder, cache_dir=model_cache / "fresh")
        index.add_documents(tool_documents(specs))
        assert len(index.vectors) == len(specs)
        assert live_sessions() == [INT8_GRAPH_FILE]
        assert encoder.query_precision == "int8" and encoder.backend == "onnx"
    # Tool texts embedded after a release are the same float32 vectors.
    again = encoder.encode(TEXTS)
    float32 = MiniLMEncoder(max_length=96, cache_dir=model_cache, query_precision="float32")
    assert np.abs(again - float32.encode(TEXTS)).max() < 1e-5


def test_float32_queries_keep_their_session_after_a_build(model_cache, stripe_specs, live_sessions):
    from codemode.search.documents import tool_documents
    from codemode.search.semantic import HybridIndex

    encoder = MiniLMEncoder(max_length=96, cache_dir=model_cache, query_precision="float32")
    index = HybridIndex(encoder=encoder, cache_dir=model_cache / "fresh32")
    index.add_documents(tool_documents(stripe_specs[:3]))
    assert live_sessions() == ["minilm-v2.onnx"]


def test_a_built_index_starts_its_query_session_on_the_first_search(
    model_cache, tiny_specs, live_sessions
):
    from codemode.search.semantic import DOCUMENT_MAX_TOKENS, HybridIndex, build_index

    index = build_index(tiny_specs, semantic=True, cache_dir=model_cache, persist=False)
    assert isinstance(index, HybridIndex)
    assert live_sessions() == []  # the build's float32 session stopped, no query session yet
    assert index.encoder.query_precision == "int8"
    hits = index.search("give a customer their money back")
    assert live_sessions() == [INT8_GRAPH_FILE]
    eager = HybridIndex(
        encoder=MiniLMEncoder(max_length=DOCUMENT_MAX_TOKENS, cache_dir=model_cache),
        lexical=index.lexical,
        vectors=index.vectors,
        cache_dir=model_cache,
    )
    assert eager.search("give a customer their money back") == hits

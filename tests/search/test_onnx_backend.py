"""The encoder on ONNX Runtime: the numpy pass's vectors, and numpy whenever ONNX Runtime cannot run.

Where ``make test`` runs (``CODEMODE_EXPECT_MODEL=1``, the ``semantic`` extra installed) a missing
onnxruntime fails these tests rather than skipping them.
"""

import logging
import sys

import pytest

from codemode.errors import UsageError
from codemode.search import onnx_backend
from codemode.search.encoder import MiniLMEncoder
from codemode.search.onnx_backend import GRAPH_FILE
from codemode.search.semantic import model_key

pytestmark = [pytest.mark.needs_model, pytest.mark.usefixtures("require_onnxruntime")]

TEXTS = [
    "give a customer their money back",
    "hi",
    "list every open pull request in the repository that was created by a specific user and "
    "has a failing status check on the default branch",
    "Create a refund. Refund a charge that has previously been created but not yet refunded. "
    "Funds are refunded to the credit or debit card that was originally charged." * 3,
]


@pytest.fixture(scope="module")
def numpy_encoder(model_cache):
    return MiniLMEncoder(max_length=96, cache_dir=model_cache, backend="numpy")


@pytest.fixture(scope="module")
def onnx_encoder(model_cache):
    return MiniLMEncoder(max_length=96, cache_dir=model_cache, backend="onnx")


def assert_same_vectors(np, a, b):
    assert a.shape == b.shape
    assert np.abs(a - b).max() < 1e-5
    assert (a * b).sum(axis=1).min() > 0.99999


def test_onnx_vectors_match_numpy_vectors(numpy_encoder, onnx_encoder, np):
    assert (numpy_encoder.backend, onnx_encoder.backend) == ("numpy", "onnx")
    # one batch with padding (mixed lengths, one truncated at 96 tokens), and one text alone
    assert_same_vectors(np, onnx_encoder.encode(TEXTS), numpy_encoder.encode(TEXTS))
    assert_same_vectors(np, onnx_encoder.encode(TEXTS[:1]), numpy_encoder.encode(TEXTS[:1]))


def test_an_index_build_sized_call_matches_numpy_too(numpy_encoder, onnx_encoder, monkeypatch, np):
    # more than one batch: ONNX Runtime runs it on a session of its own, with batch_threads
    created = []

    class CountingForward(onnx_backend.OnnxForward):
        def __init__(self, path, *, threads):
            created.append(threads)
            super().__init__(path, threads=threads)

    monkeypatch.setattr(onnx_backend, "OnnxForward", CountingForward)
    texts = [f"{text} number {n}" for n in range(12) for text in TEXTS]
    assert len(texts) > 32
    assert_same_vectors(np, onnx_encoder.encode(texts), numpy_encoder.encode(texts))
    assert created == [onnx_encoder.batch_threads] == [2]


def test_auto_picks_onnx_runtime_and_keeps_the_cache_key(model_cache, numpy_encoder):
    auto = MiniLMEncoder(max_length=96, cache_dir=model_cache, document_precision="float32")
    assert auto.backend == "onnx"
    # stored vectors stay valid across backends: the key names the model, not the backend
    # (8-bit tool texts have keys of their own: test_int8_documents.py)
    assert model_key(auto) == model_key(numpy_encoder)


def test_the_graph_is_written_once_beside_the_weights_and_not_copying_them(
    model_cache, onnx_encoder, prepared_dir
):
    path = prepared_dir(model_cache) / GRAPH_FILE
    stamp = path.stat().st_mtime_ns
    assert MiniLMEncoder(max_length=96, cache_dir=model_cache, backend="onnx").backend == "onnx"
    assert path.stat().st_mtime_ns == stamp
    # the weights stay in the flat .npy file the graph points at (90 MB): the graph is small
    assert path.stat().st_size < 1_000_000
    assert not list(path.parent.glob("*.tmp"))


def test_without_onnxruntime_auto_embeds_with_numpy(model_cache, onnx_encoder, monkeypatch, np):
    expected = onnx_encoder.encode(TEXTS)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` now fails
    auto = MiniLMEncoder(max_length=96, cache_dir=model_cache)
    assert auto.backend == "numpy"
    assert_same_vectors(np, auto.encode(TEXTS), expected)
    with pytest.raises(UsageError, match="needs onnxruntime"):
        MiniLMEncoder(max_length=96, cache_dir=model_cache, backend="onnx")


def test_a_graph_that_does_not_load_falls_back_to_numpy_with_one_warning(
    tmp_path, numpy_encoder, fresh_onnx_warnings, caplog, np, prepared_dir
):
    MiniLMEncoder(max_length=96, cache_dir=tmp_path, backend="onnx")  # prepares the weights
    (prepared_dir(tmp_path) / GRAPH_FILE).write_bytes(b"not an onnx model")
    with caplog.at_level(logging.WARNING, logger="codemode.search"):
        # float32 queries: the float32 session starts at once (with int8 queries it waits for
        # the first tool texts: tests/search/test_int8_query.py)
        first = MiniLMEncoder(max_length=96, cache_dir=tmp_path, query_precision="float32")
        second = MiniLMEncoder(max_length=96, cache_dir=tmp_path, query_precision="float32")
    assert (first.backend, second.backend) == ("numpy", "numpy")
    warnings = [r for r in caplog.records if "embedding with numpy" in r.getMessage()]
    assert len(warnings) == 1
    assert "ONNX Runtime could not start" in warnings[0].getMessage()
    assert_same_vectors(np, first.encode(TEXTS), numpy_encoder.encode(TEXTS))
    with pytest.raises(UsageError, match="could not start"):
        MiniLMEncoder(max_length=96, cache_dir=tmp_path, backend="onnx")


def test_a_failing_onnx_run_answers_with_numpy(
    model_cache, numpy_encoder, fresh_onnx_warnings, caplog, np
):
    broken = MiniLMEncoder(max_length=96, cache_dir=model_cache, backend="onnx")

    def fail(token_ids, mask):
        raise RuntimeError("session lost")

    broken._onnx = fail
    with caplog.at_level(logging.WARNING, logger="codemode.search"):
        vectors = broken.encode(TEXTS)
    assert broken.backend == "numpy"
    assert any("session lost" in r.getMessage() for r in caplog.records)
    assert_same_vectors(np, vectors, numpy_encoder.encode(TEXTS))


def test_onnx_needs_a_cache_directory_for_its_graph(fresh_onnx_warnings):
    assert MiniLMEncoder(max_length=96).backend == "numpy"
    with pytest.raises(UsageError, match="cache directory"):
        MiniLMEncoder(max_length=96, backend="onnx")


def test_an_unknown_backend_is_refused():
    with pytest.raises(UsageError, match="unknown encoder backend 'torch'"):
        MiniLMEncoder(backend="torch")  # type: ignore[arg-type]


def test_a_stored_index_opens_on_either_backend_with_the_same_answers(tiny_specs):
    from codemode.search.semantic import (
        DOCUMENT_MAX_TOKENS,
        HybridIndex,
        build_index,
        open_stored_index,
    )
    from codemode.search.store import catalog_fingerprint, default_cache_dir

    built = build_index(tiny_specs, semantic=True)
    assert isinstance(built, HybridIndex) and built.encoder.backend == "onnx"
    fingerprint = catalog_fingerprint(tiny_specs)
    on_numpy = open_stored_index(fingerprint, semantic=True, backend="numpy")
    on_onnx = open_stored_index(fingerprint, semantic=True)  # int8 queries
    float32 = MiniLMEncoder(
        max_length=DOCUMENT_MAX_TOKENS, cache_dir=default_cache_dir(), query_precision="float32"
    )
    on_float32 = open_stored_index(fingerprint, semantic=True, encoder=float32)
    assert isinstance(on_numpy, HybridIndex) and isinstance(on_onnx, HybridIndex)
    assert isinstance(on_float32, HybridIndex)
    assert (on_numpy.encoder.backend, on_onnx.encoder.backend) == ("numpy", "onnx")
    assert (on_onnx.encoder.query_precision, float32.query_precision) == ("int8", "float32")
    for query in ("give a customer their money back", "remove a client"):
        numpy_hits, onnx_hits = on_numpy.search(query, 5), on_onnx.search(query, 5)
        float32_hits = on_float32.search(query, 5)
        assert [h.tool for h in numpy_hits] == [h.tool for h in float32_hits]
        assert [h.score for h in numpy_hits] == pytest.approx(
            [h.score for h in float32_hits], abs=1e-5
        )
        # 8-bit query weights: the same tools, scores within a few thousandths
        assert [h.tool for h in numpy_hits] == [h.tool for h in onnx_hits]
        assert [h.score for h in numpy_hits] == pytest.approx(
            [h.score for h in onnx_hits], abs=0.01
        )


def test_the_cli_searches_a_stored_index_in_process_with_the_gateways_encoder(monkeypatch):
    # numpy's pass would be cheaper for one query, but its float32 query weights order near ties
    # unlike the gateway's 8-bit ones: the CLI must print the search tool's answer.
    from codemode.cli import search_command
    from codemode.search import semantic
    from codemode.search.store import IndexStore

    asked = []

    def open_stored(fingerprint, **kwargs):
        asked.append(kwargs)

    monkeypatch.setattr(IndexStore, "lookup_inputs", lambda self, key: "f" * 32)
    monkeypatch.setattr(semantic, "open_stored_index", open_stored)
    assert search_command._search_stored("key", "q", 5, semantic=True, daemon=False) is None
    assert asked == [{"semantic": True}]  # the default backend, "auto", as the gateway's


def test_doctor_says_which_runtime_embeds(monkeypatch):
    from codemode.cli.doctor_checks import check_semantic

    check = check_semantic()
    assert (check.level, check.fix) == ("ok", "") and "on ONNX Runtime" in check.detail
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    check = check_semantic()
    assert check.level == "ok" and "on numpy" in check.detail
    assert check.fix == "pip install onnxruntime onnx"

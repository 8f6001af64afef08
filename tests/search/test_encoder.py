import json
import os
from pathlib import Path

import pytest

from codemode.search.encoder import MiniLMEncoder

pytestmark = pytest.mark.needs_model


@pytest.fixture(scope="module")
def encoder():
    return MiniLMEncoder()


def test_vectors_are_unit_length(encoder, np):
    vectors = encoder.encode(["hello world", "refund the last charge"])
    assert vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_paraphrases_are_closer_than_unrelated_sentences(encoder, np):
    a, b, c = encoder.encode(
        [
            "How do I cancel my subscription?",
            "I want to stop my monthly membership",
            "The cat sat on the mat",
        ]
    )
    assert a @ b > 0.6
    assert a @ c < 0.2


def test_batching_and_padding_do_not_change_vectors(encoder, np):
    texts = ["short", "a much longer sentence about refunds and charges and invoices"]
    together = encoder.encode(texts, batch_size=2)
    alone = np.vstack([encoder.encode([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)


def test_forward_pass_output_is_pinned(encoder, np):
    # Our own output, recorded when the encoder was written: catches a changed forward pass.
    vector = encoder.encode(["How do I cancel my subscription?"])[0]
    assert np.allclose(vector[:3], [0.00048117, 0.00568103, -0.00235097], atol=1e-4)


def test_empty_input(encoder, np):
    assert encoder.encode([]).shape == (0, 384)


def test_the_forward_pass_runs_blas_on_one_thread_and_restores_it() -> None:
    import numpy  # noqa: F401 - loads the BLAS to look at
    from threadpoolctl import threadpool_info

    from codemode.search.blas import blas_threads as _blas_threads

    def blas_threads() -> set[int]:
        return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}

    before = blas_threads()
    assert before, "numpy's BLAS is loaded"
    with _blas_threads(1):
        assert blas_threads() == {1}
    assert blas_threads() == before


def test_token_states_come_from_the_same_pass_as_the_pooled_vector(encoder, np):
    text = "refund the last charge"
    vector, tokens = encoder.encode_with_tokens(text)
    assert np.allclose(vector, encoder.encode([text])[0], atol=1e-6)
    assert np.allclose(tokens, encoder.encode_tokens([text])[0], atol=1e-6)
    # one row per word piece, without [CLS] and [SEP], each a unit vector
    assert tokens.shape == (len(encoder._tokenizer.encode(text).ids) - 2, 384)
    assert np.allclose(np.linalg.norm(tokens, axis=1), 1.0, atol=1e-5)


def test_token_states_do_not_depend_on_batch_padding(encoder, np):
    texts = ["short", "a much longer sentence about refunds and charges and invoices"]
    together = encoder.encode_tokens(texts, batch_size=2)
    for text, rows in zip(texts, together, strict=True):
        assert np.allclose(rows, encoder.encode_tokens([text])[0], atol=1e-5)


def test_earlier_layers_are_less_contextual(encoder, np):
    # "charge" is the second word of both texts: before any layer its state depends only on the
    # word and its position; after all six it depends on the words around it too.
    texts = ["refund charge now", "refund charge of the disputed invoice quickly"]
    first, second = (encoder.encode_tokens([t], layers=0)[0] for t in texts)
    assert np.allclose(first[1], second[1], atol=1e-5)
    first, second = (encoder.encode_tokens([t])[0] for t in texts)
    assert not np.allclose(first[1], second[1], atol=1e-3)


def test_asking_for_more_layers_than_the_model_has_says_how_many_there_are(encoder):
    from codemode.errors import UsageError

    with pytest.raises(UsageError, match="6 layers"):
        encoder.encode_tokens(["x"], layers=7)


def test_prepared_weights_are_one_mapped_file_shared_by_copies_of_the_model(tmp_path, np):
    import shutil

    from codemode.search.encoder import model_dir

    cache = tmp_path / "cache"
    legacy = cache / "models" / "all-MiniLM-L6-v2-90868376-1796135245703423574"
    legacy.mkdir(parents=True)
    (legacy / "0.qkv_w.npy").write_bytes(b"old layout")
    flat = cache / "models" / "all-MiniLM-L6-v2-flat-90868376-d480bd19774e5ade"
    flat.mkdir()
    (flat / "weights.npy").write_bytes(b"keyed by a partial digest")
    vocab = cache / "models" / "all-MiniLM-L6-v2-vocab-466247-02911b329637ec99.txt"
    vocab.write_text("[PAD]\n")
    first = MiniLMEncoder(cache_dir=cache)
    prepared = list((cache / "models").glob("all-MiniLM-L6-v2-weights-*"))
    assert [p.name.split("-weights-")[0] for p in prepared] == ["all-MiniLM-L6-v2"]
    # less the ONNX graphs (float32, and the queries' one with its 8-bit weights)
    graphs = {"minilm-v2.onnx", "minilm-int8-v1.onnx", "weights-int8-v1.bin"}
    files = {f.name for f in prepared[0].iterdir()} - graphs
    assert sorted(files) == ["done", "layout.json", "weights.npy"]
    # The old layouts' 90 MB are given back.
    assert not legacy.exists() and not flat.exists() and not vocab.exists()
    # A copy of the model files (a reinstall, another directory) maps the same prepared file.
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("model.safetensors", "tokenizer.json"):
        shutil.copy(model_dir() / name, copy / name)
    second = MiniLMEncoder(copy, cache_dir=cache)
    assert list((cache / "models").glob("all-MiniLM-L6-v2-weights-*")) == prepared
    text = ["How do I cancel my subscription?"]
    assert np.allclose(first.encode(text), second.encode(text), atol=1e-6)
    second._hidden(np.zeros((1, 2), dtype=np.int64), np.ones((1, 2), dtype=np.float32), 1)
    assert str(prepared[0] / "weights.npy") in Path("/proc/self/maps").read_text()  # mapped
    assert np.allclose(first.encode(text), MiniLMEncoder().encode(text), atol=1e-6)


def test_numpy_imported_for_one_query_starts_one_blas_thread_and_leaves_the_environment() -> None:
    import subprocess
    import sys

    script = (
        "import os, json\n"
        "from codemode.search.encoder import import_numpy_single_threaded\n"
        "import_numpy_single_threaded()\n"
        "from threadpoolctl import threadpool_info\n"
        "blas = [p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas']\n"
        "print(json.dumps([blas, os.environ.get('OPENBLAS_NUM_THREADS')]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout
    blas, variable = json.loads(out)
    assert blas == [1]  # without the helper numpy's OpenBLAS starts one thread per core
    assert variable is None  # set for the import only

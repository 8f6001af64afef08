"""Weights other than the pinned model's (a ``$CODEMODE_MODEL_DIR`` holding a fine-tuned copy of
the same size) get their own prepared weights, vectors and daemon: nothing made by one model is
used with another."""

import shutil
from pathlib import Path

import pytest

from codemode.search.encoder import MiniLMEncoder, model_dir
from codemode.search.semantic import model_key
from codemode.search.weights import file_digest, model_variant

pytestmark = pytest.mark.needs_model

TENSOR = "encoder.layer.2.attention.self.query.weight"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the model with one matrix nudged in place: same size, same first and last MiB."""
    import json
    import struct

    import numpy as np

    source = model_dir()
    assert source is not None
    target = tmp_path_factory.mktemp("tuned")
    shutil.copy(source / "model.safetensors", target / "model.safetensors")
    shutil.copy(source / "tokenizer.json", target / "tokenizer.json")
    with (target / "model.safetensors").open("r+b") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        entry = json.loads(handle.read(length))[TENSOR]
        assert entry["dtype"] == "F32"
        start, end = entry["data_offsets"]
        handle.seek(8 + length + start)
        matrix = np.frombuffer(handle.read(end - start), dtype="<f4")
        nudged = matrix + np.random.default_rng(7).normal(0, 0.05, matrix.shape).astype("<f4")
        handle.seek(8 + length + start)
        handle.write(nudged.tobytes())
    size = (source / "model.safetensors").stat().st_size
    assert (target / "model.safetensors").stat().st_size == size
    with (
        (source / "model.safetensors").open("rb") as a,
        (target / "model.safetensors").open("rb") as b,
    ):
        assert a.read(1 << 20) == b.read(1 << 20)  # what the old partial digest read
        a.seek(size - (1 << 20))
        b.seek(size - (1 << 20))
        assert a.read() == b.read()
    return target


def test_the_pinned_model_keeps_its_vector_key_and_a_tuned_copy_gets_its_own(
    tuned: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    pinned = MiniLMEncoder(cache_dir=cache, backend="numpy")
    other = MiniLMEncoder(tuned, cache_dir=cache, backend="numpy")
    assert pinned.variant == "" and model_key(pinned) == "all-MiniLM-L6-v2-128"
    assert len(other.variant) == 16 and model_key(other) == f"all-MiniLM-L6-v2-128-{other.variant}"
    # Each runs its own weights: the tuned copy's prepared file is not the pinned one's.
    prepared = sorted(p.name for p in (cache / "models").glob("all-MiniLM-L6-v2-weights-*"))
    assert len(prepared) == 2
    text = ["refund the last charge of a customer"]
    assert float((pinned.encode(text) @ other.encode(text).T)[0, 0]) < 0.9999


def test_a_file_is_hashed_once_per_copy_and_again_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib

    cache = tmp_path / "cache"
    source = tmp_path / "model.bin"
    source.write_bytes(b"a" * 4096)
    expected = hashlib.sha256(b"a" * 4096).hexdigest()
    assert file_digest(source, cache) == expected
    reads: list[object] = []
    real = hashlib.file_digest

    def counting(handle: object, name: str) -> object:
        reads.append(handle)
        return real(handle, name)  # type: ignore[arg-type]

    monkeypatch.setattr(hashlib, "file_digest", counting)
    assert file_digest(source, cache) == expected
    assert reads == []  # remembered for this copy
    source.write_bytes(b"b" * 4096)  # same size, new content and times
    assert file_digest(source, cache) == hashlib.sha256(b"b" * 4096).hexdigest()
    assert len(reads) == 1


def test_a_damaged_digest_memo_is_recomputed(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    source = tmp_path / "model.bin"
    source.write_bytes(b"weights")
    right = file_digest(source, cache)
    for memo in (cache / "models" / "digests").iterdir():
        memo.write_text("not a digest")
    assert file_digest(source, cache) == right


def test_the_daemon_key_names_the_model_variant(
    tuned: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.search.daemon.runtime import daemon_key

    cache = tmp_path / "cache"
    monkeypatch.delenv("CODEMODE_MODEL_DIR", raising=False)
    pinned = daemon_key("f" * 16, True, cache)
    monkeypatch.setenv("CODEMODE_MODEL_DIR", str(tuned))
    assert model_variant(tuned, cache) != ""
    assert daemon_key("f" * 16, True, cache) != pinned
    # A lexical daemon does not depend on the model.
    lexical = daemon_key("f" * 16, False, cache)
    monkeypatch.delenv("CODEMODE_MODEL_DIR")
    assert daemon_key("f" * 16, False, cache) == lexical

"""The model's files made ready for the forward pass, once per model and cache directory.

``prepared_weights``: the safetensors matrices converted (float32, QKV fused, transposed for
``x @ w``) into one flat ``.npy`` file with a JSON layout, memory-mapped by every later process
(a millisecond, where 77 files took 30 ms), keyed by the model file's content so copies of one
model (a reinstall, a test's copy) share it. ``wordpiece``: the vocabulary for the plain-Python
tokenizer of ASCII queries (``search/wordpiece.py``), kept beside it. ``model_variant``: names
weights other than the pinned ones, for every cache of vectors they make.

Content is the whole file's sha256, remembered per copy (path, size, inode and times) under
``<cache>/models/digests/``: hashing 90 MB once per copy costs about 0.1 s, finding it again one
``stat``. (A digest of the first and last MiB, used before, named a fine-tuned copy of the same
size like the original, whose prepared weights it would then have run.)
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codemode.search.arrays import FloatArray
    from codemode.search.wordpiece import WordPiece

__all__ = [
    "LAYERS",
    "MODEL_ID",
    "ModelWeights",
    "content_stamp",
    "file_digest",
    "model_variant",
    "prepared_weights",
    "ready_copy",
    "wordpiece",
]

MODEL_ID = "all-MiniLM-L6-v2"
LAYERS = 6


def wordpiece(path: Path, cache_dir: Path | None) -> WordPiece | None:
    """The plain-Python tokenizer for ASCII text, its vocabulary taken from ``tokenizer.json``
    once and kept in ``cache_dir``; None without a cache (the ``tokenizers`` one is used)."""
    from codemode.search.wordpiece import WordPiece, write_vocab

    if cache_dir is None:
        return None
    try:
        stamp = content_stamp(path / "tokenizer.json", cache_dir)
    except OSError:
        return None
    vocab = cache_dir / "models" / f"{MODEL_ID}-wordpiece-{stamp}.txt"
    if not vocab.is_file():
        with contextlib.suppress(OSError):
            vocab.parent.mkdir(parents=True, exist_ok=True)
        if not write_vocab(path / "tokenizer.json", vocab):
            return None
    return WordPiece.load(vocab)


def prepared_weights(
    path: Path, cache_dir: Path | None
) -> tuple[dict[str, FloatArray], Path | None]:
    """The model's matrices laid out for ``_forward``, memory-mapped from ``cache_dir`` when a
    prepared copy is there (one flat file and its layout: a new process maps it in a
    millisecond), else read and stored; and the directory of the prepared copy (None when there
    is none: the ONNX graph points at the flat file, so it needs one)."""
    prepared = ready_copy(path, cache_dir)
    if prepared is not None:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            return mapped(prepared), prepared
    source = path / "model.safetensors"
    weights = _read_weights(source)
    if cache_dir is None:
        return weights, None
    prepared = _prepared_dir(source, cache_dir)
    with contextlib.suppress(OSError):
        _store_flat(weights, prepared)
    _remove_old_layouts(prepared.parent)
    return weights, prepared if (prepared / "done").is_file() else None


def _prepared_dir(source: Path, cache_dir: Path) -> Path:
    return cache_dir / "models" / f"{MODEL_ID}-weights-{content_stamp(source, cache_dir)}"


def ready_copy(path: Path, cache_dir: Path | None) -> Path | None:
    """The directory of the model's prepared copy if one is complete in ``cache_dir``."""
    if cache_dir is None:
        return None
    prepared = _prepared_dir(path / "model.safetensors", cache_dir)
    return prepared if (prepared / "done").is_file() else None


class ModelWeights:
    """The forward pass's matrices (``prepared_weights``), mapped on their first use when a
    prepared copy is there already: a process that embeds with ONNX Runtime, or only opens a
    stored index, then never imports numpy for them."""

    def __init__(self, path: Path, cache_dir: Path | None) -> None:
        self._path, self._cache_dir = path, cache_dir
        self.prepared = ready_copy(path, cache_dir)
        self._matrices: dict[str, FloatArray] | None = None
        self._layers: list[dict[str, FloatArray]] | None = None
        if self.prepared is None:  # made now: the ONNX graphs point into the prepared copy
            self._matrices, self.prepared = prepared_weights(path, cache_dir)

    def matrices(self) -> dict[str, FloatArray]:
        if self._matrices is None:
            self._matrices, _prepared = prepared_weights(self._path, self._cache_dir)
        return self._matrices

    def layers(self, keys: Sequence[str]) -> list[dict[str, FloatArray]]:
        """Each layer's matrices by name (``keys``), gathered once: every pass reads them."""
        if self._layers is None:
            w = self.matrices()
            self._layers = [{name: w[f"{i}.{name}"] for name in keys} for i in range(LAYERS)]
        return self._layers


def content_stamp(source: Path, cache_dir: Path | None) -> str:
    """The file's size and content digest, for names of what is made from it."""
    return f"{source.stat().st_size}-{file_digest(source, cache_dir)[:16]}"


def file_digest(source: Path, cache_dir: Path | None) -> str:
    """The sha256 of ``source``'s content, remembered in ``cache_dir`` for this copy of it: a
    copy written again (new size, inode or times) is hashed again."""
    import hashlib

    info = source.stat()
    memo: Path | None = None
    if cache_dir is not None:
        identity = "\0".join(
            str(part)
            for part in (
                source.resolve(),
                info.st_size,
                info.st_dev,
                info.st_ino,
                info.st_mtime_ns,
                info.st_ctime_ns,
            )
        )
        memo = cache_dir / "models" / "digests" / hashlib.sha256(identity.encode()).hexdigest()[:32]
        with contextlib.suppress(OSError, UnicodeDecodeError):
            known = memo.read_text().strip()
            if len(known) == 64 and all(c in "0123456789abcdef" for c in known):
                return known
    with source.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    if memo is not None:
        with contextlib.suppress(OSError):
            memo.parent.mkdir(parents=True, exist_ok=True)
            partial = memo.with_name(f"{memo.name}.{os.getpid()}.tmp")
            partial.write_text(digest)
            partial.replace(memo)
    return digest


def model_variant(path: Path, cache_dir: Path | None) -> str:
    """ "" for the pinned model files; else a short digest of the weights and vocabulary in
    ``path`` (e.g. a ``$CODEMODE_MODEL_DIR`` holding another or a fine-tuned model), which
    every cache of vectors made with them names, so no vector is compared with another
    model's."""
    import hashlib

    from codemode.search.model.package import MINILM

    names = ("model.safetensors", "tokenizer.json")
    digests = [file_digest(path / name, cache_dir) for name in names]
    if digests == [MINILM.files[name] for name in names]:
        return ""
    return hashlib.sha256("\0".join(digests).encode()).hexdigest()[:16]


def _remove_old_layouts(models: Path) -> None:
    """Earlier versions prepared a directory of .npy files per model file and modification
    time (``<model>-<size>-<mtime>``), then one flat file keyed by a partial digest
    (``<model>-flat-...``, ``<model>-vocab-....txt``): 90 MB each, never read again."""
    import re

    legacy = re.compile(re.escape(MODEL_ID) + r"-(\d+-\d+|flat-.+|vocab-.+\.txt)")
    with contextlib.suppress(OSError):
        for entry in models.iterdir():
            if not legacy.fullmatch(entry.name):
                continue
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def mapped(prepared: Path) -> dict[str, FloatArray]:
    import json

    import numpy as np

    flat = np.load(prepared / "weights.npy", mmap_mode="r", allow_pickle=False)
    layout = json.loads((prepared / "layout.json").read_text())
    out: dict[str, FloatArray] = {}
    for name, (offset, shape) in layout.items():
        size = math.prod(shape)
        if offset + size > flat.shape[0]:
            raise ValueError(f"prepared weights too short for {name}")
        out[name] = np.asarray(flat[offset : offset + size]).reshape(shape)
    return out


def _store_flat(weights: dict[str, FloatArray], prepared: Path) -> None:
    """Write ``weights`` as one float32 file plus its layout, then ``done``, under a temporary
    name renamed into place (a concurrent reader sees all of it or nothing)."""
    import json

    import numpy as np

    partial = prepared.with_name(f"{prepared.name}.{os.getpid()}.tmp")
    partial.mkdir(parents=True, exist_ok=True)
    layout: dict[str, tuple[int, list[int]]] = {}
    offset = 0
    for name, array in weights.items():
        layout[name] = (offset, list(array.shape))
        offset += array.size
    flat = np.concatenate([array.reshape(-1) for array in weights.values()]).astype(np.float32)
    np.save(partial / "weights.npy", flat, allow_pickle=False)
    (partial / "layout.json").write_text(json.dumps(layout))
    (partial / "done").write_text("ok")
    if prepared.exists():
        shutil.rmtree(partial, ignore_errors=True)
    else:
        partial.rename(prepared)


def _read_weights(source: Path) -> dict[str, FloatArray]:
    import numpy as np
    from safetensors.numpy import load_file

    w = {k: v.astype(np.float32) for k, v in load_file(str(source)).items()}
    out: dict[str, FloatArray] = {
        "word": w["embeddings.word_embeddings.weight"],
        # Token type is always 0 for single sentences: fold it into the position table.
        "position": w["embeddings.position_embeddings.weight"]
        + w["embeddings.token_type_embeddings.weight"][0],
        "emb_ln_w": w["embeddings.LayerNorm.weight"],
        "emb_ln_b": w["embeddings.LayerNorm.bias"],
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        names = ("query", "key", "value")
        qkv_w = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in names])
        qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in names])
        layer = {
            "qkv_w": qkv_w.T,
            "qkv_b": qkv_b,
            "out_w": w[p + "attention.output.dense.weight"].T,
            "out_b": w[p + "attention.output.dense.bias"],
            "ln1_w": w[p + "attention.output.LayerNorm.weight"],
            "ln1_b": w[p + "attention.output.LayerNorm.bias"],
            "up_w": w[p + "intermediate.dense.weight"].T,
            "up_b": w[p + "intermediate.dense.bias"],
            "down_w": w[p + "output.dense.weight"].T,
            "down_b": w[p + "output.dense.bias"],
            "ln2_w": w[p + "output.LayerNorm.weight"],
            "ln2_b": w[p + "output.LayerNorm.bias"],
        }
        out |= {f"{i}.{name}": np.ascontiguousarray(array) for name, array in layer.items()}
    return out

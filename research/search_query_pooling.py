"""Re-pooling the query's token states instead of their plain mean, on the dev split.

Only the query side changes: the tool vectors are the stored index's, so an index built
today would stay valid. Each dev query runs once through MiniLM (numpy, float32) and its last
layer's token states (``[CLS]`` and ``[SEP]`` included, not normalized, as ``encode`` pools
them) are pooled with weights per token, L2-normalized, and ranked in the usual blend
(``HybridIndex.scores``: 0.2 x normalized BM25 + 0.8 x cosine). Settings:

* ``default``: the shipped query vector (``encode_query``, 8-bit weights on ONNX Runtime when
  it is installed); ``mean``: the plain mean of the float32 states, which every other setting
  changes;
* ``no-cls-sep``: the mean without ``[CLS]`` and ``[SEP]``;
* ``idf^p``: weight = IDF of the word piece over the catalog's tool texts (both embedded views
  of each tool, df counted per tool), ``log((N + 1) / (df + 1)) + 1`` raised to ``p``
  (``[CLS]`` and ``[SEP]``, in every text, weigh 1; ``-nosep``: left out);
* ``stop=w``: pieces of a word in the search's stopword list (``codemode.search.text``) weigh
  ``w``, the rest 1 (``-nosep``: without ``[CLS]`` and ``[SEP]``);
* ``idf^p*stop=w``: both weights multiplied (catalog IDF alone lifts "I", "how", "my": API
  texts rarely say them);
* ``mix=l,idf^p``: ``l`` x the plain mean vector + ``(1 - l)`` x the ``idf^p`` vector (each a
  unit vector), normalized.

The held-out split is read only with ``--heldout SETTING`` (then: ``default``, ``mean`` and
that setting alone): run it once, and only for a setting that gained on dev.

    PYTHONPATH=src .venv/bin/python research/search_query_pooling.py [--heldout SETTING]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Beside each other and the benchmarks' search evaluation (search.py, search_eval.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search import load_catalog
from search_eval import DEV, HELDOUT, load_tasks, summarize, task_rank

from codemode.search.documents import tool_documents
from codemode.search.semantic import HybridIndex, build_index
from codemode.search.store import default_cache_dir
from codemode.search.text import STOPWORDS
from codemode.tools import ToolSpec

IDF_POWERS = (0.5, 1.0, 2.0, 4.0)
STOP_WEIGHTS = (0.1, 0.25, 0.5)
MIXES = (0.25, 0.5, 0.75)


class GivenQueries(HybridIndex):
    """The stored index, ranking with query vectors set from outside (``given``)."""

    given: dict[str, Any]

    def query_vector(self, query: str) -> Any:
        return self.given[query]


def unit(x: Any) -> Any:
    import numpy as np

    return (x / max(float(np.linalg.norm(x)), 1e-12)).astype(np.float32)


def catalog_idf(hybrid: HybridIndex, specs: Sequence[ToolSpec]) -> Callable[[int], float]:
    """Smoothed IDF of a word-piece id over the tools' embedded texts (df counted per tool)."""
    encoder = hybrid.encoder
    documents = tool_documents(specs)
    views = [len(d.semantic_texts) for d in documents]
    ids = encoder._token_ids([text for d in documents for text in d.semantic_texts])
    df: dict[int, int] = {}
    at = 0
    for count in views:
        for piece in set().union(*ids[at : at + count]):
            df[piece] = df.get(piece, 0) + 1
        at += count
    n = len(documents)
    if n == 0 or not df:
        raise SystemExit("no tool texts to count word pieces in")
    return lambda piece: math.log((n + 1) / (df.get(piece, 0) + 1)) + 1.0


def stopword_mask(pieces: Sequence[str]) -> list[bool]:
    """Per piece: whether the whole word it belongs to ("##" pieces continue one) is a stopword."""
    words: list[list[int]] = []
    for i, piece in enumerate(pieces):
        if piece.startswith("##") and words:
            words[-1].append(i)
        else:
            words.append([i])
    mask = [False] * len(pieces)
    for word in words:
        text = "".join(pieces[i].removeprefix("##") for i in word).lower()
        for i in word:
            mask[i] = text in STOPWORDS
    return mask


def pooled_vectors(
    hybrid: HybridIndex, queries: Sequence[str], idf: Callable[[int], float]
) -> dict[str, dict[str, Any]]:
    """Per setting name, per query: its unit vector."""
    import numpy as np

    encoder = hybrid.encoder
    out: dict[str, dict[str, Any]] = {}

    def put(name: str, query: str, vector: Any) -> None:
        out.setdefault(name, {})[query] = vector

    for query in queries:
        put("default", query, encoder.encode_query(query))
        ids = encoder._token_ids([query])[0]
        token_ids = np.asarray([ids], dtype=np.int64)
        with encoder.blas_threads():
            states = encoder._hidden(token_ids, np.ones((1, len(ids)), np.float32))[0]
        pieces = [encoder._tokenizer.id_to_token(i) for i in ids]
        inner = np.zeros(len(ids), dtype=np.float32)
        inner[1:-1] = 1.0  # 0 at [CLS] and [SEP]
        stop = np.asarray(stopword_mask(pieces), dtype=bool) & (inner > 0)
        idf_row = np.asarray([idf(i) for i in ids], dtype=np.float32)

        def pool(weights: Any, states: Any = states) -> Any:
            return unit((weights[:, None] * states).sum(axis=0) / weights.sum())

        mean = pool(np.ones(len(ids), dtype=np.float32))
        put("mean", query, mean)
        put("no-cls-sep", query, pool(inner))
        for p in IDF_POWERS:
            put(f"idf^{p:g}", query, pool(idf_row**p))
            if p in (1.0, 2.0):
                put(f"idf^{p:g}-nosep", query, pool(idf_row**p * inner))
        for w in STOP_WEIGHTS:
            weights = np.where(stop, np.float32(w), np.float32(1.0))
            put(f"stop={w:g}", query, pool(weights))
            put(f"stop={w:g}-nosep", query, pool(weights * inner))
        for p in (1.0, 2.0):
            for w in (0.1, 0.25):
                weights = np.where(stop, np.float32(w), np.float32(1.0)) * idf_row**p
                put(f"idf^{p:g}*stop={w:g}", query, pool(weights))
        for p in (1.0, 2.0):
            weighted = out[f"idf^{p:g}"][query]
            for share in MIXES:
                put(f"mix={share:g},idf^{p:g}", query, unit(share * mean + (1 - share) * weighted))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heldout", metavar="SETTING", help="the held-out split, one setting")
    parser.add_argument("--cache-dir", type=Path)
    args = parser.parse_args(argv)

    specfiles, tasks = load_tasks([HELDOUT if args.heldout else DEV])
    servers, tools = load_catalog(specfiles)
    all_specs = [spec for specs in tools.values() for spec in specs]
    stored = build_index(all_specs, semantic=True, cache_dir=args.cache_dir or default_cache_dir())
    assert isinstance(stored, HybridIndex)
    hybrid = GivenQueries(encoder=stored.encoder, lexical=stored.lexical, vectors=stored.vectors)

    start = time.perf_counter()
    idf = catalog_idf(hybrid, all_specs)
    idf_s = time.perf_counter() - start
    start = time.perf_counter()
    vectors = pooled_vectors(hybrid, [t["query"] for t in tasks], idf)
    pooled_s = time.perf_counter() - start
    if args.heldout:
        if args.heldout not in vectors:
            raise SystemExit(f"no setting {args.heldout!r}; one of: {', '.join(vectors)}")
        vectors = {name: vectors[name] for name in ("default", "mean", args.heldout)}
    split = "held-out" if args.heldout else "dev"
    print(
        f"{split}: {len(tasks)} tasks; IDF over {len(hybrid)} tools {idf_s:.1f} s, "
        f"query states and pools {pooled_s:.1f} s"
    )

    print(f"setting             {split} r@1 / r@5 / r@10, MRR@10   paraphrase r@5 (n)  cos(mean)")
    for name, by_query in vectors.items():
        hybrid.given = by_query
        ranks: dict[str, list[int | None]] = {}
        for task in tasks:
            rank = task_rank(hybrid.search(task["query"], 10), task, servers[task["spec"]])
            for style in ("all", task["style"]):
                ranks.setdefault(style, []).append(rank)
        row, para = summarize(ranks["all"]), summarize(ranks["paraphrase"])
        closeness = statistics.median(
            float(by_query[t["query"]] @ vectors["mean"][t["query"]]) for t in tasks
        )
        print(
            f"{name:<19} {row['r@1']:.3f} / {row['r@5']:.3f} / {row['r@10']:.3f}, "
            f"{row['mrr']:.3f}          {para['r@5']:.3f} ({para['n']:.0f})        "
            f"{closeness:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

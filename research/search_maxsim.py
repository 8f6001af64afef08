"""Late-interaction (MaxSim) re-ranking of the hybrid search's top candidates, on the dev split.

Each query token's hidden state (after ``--layer`` MiniLM layers, L2-normalized, optionally
centered on the mean document token) is matched to its most similar token of a candidate tool's
first view (``semantic_texts[0]``); the mean over query tokens is the tool's MaxSim score.
The top ``--candidates`` of the default blend are re-ordered by ``blend + weight * MaxSim``
(raw, or z-scored within the candidates with ``--z``) for each weight of ``--weights``, and
the default ranking is printed next to them. Every tool's token states are computed once per
run (about 1.5 minutes for the three specs on the project's 2-core machine). The held-out split
is not read: a setting is measured there only after it gains on dev.

    .venv/bin/python research/search_maxsim.py [--layer 4] [--center] [--z]
        [--candidates 30] [--weights 0.01,0.02,0.05] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Beside each other and the benchmarks' search evaluation (search.py, search_eval.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search import load_catalog, rss_mb
from search_eval import DEV, load_tasks, summarize, task_rank

from codemode.search.documents import tool_documents
from codemode.search.semantic import HybridIndex, build_index
from codemode.search.store import default_cache_dir


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer", type=int, default=6, help="MiniLM layers run (1 to 6)")
    parser.add_argument("--center", action="store_true", help="subtract the mean tool token")
    parser.add_argument("--z", action="store_true", help="z-score MaxSim within the candidates")
    parser.add_argument("--candidates", type=int, default=30)
    parser.add_argument("--weights", default="0.05,0.1,0.2,0.4")
    parser.add_argument("--cache-dir", type=Path)
    args = parser.parse_args(argv)
    import numpy as np

    specfiles, tasks = load_tasks([DEV])
    servers, tools = load_catalog(specfiles)
    all_specs = [spec for specs in tools.values() for spec in specs]
    hybrid = build_index(all_specs, semantic=True, cache_dir=args.cache_dir or default_cache_dir())
    assert isinstance(hybrid, HybridIndex)
    encoder = hybrid.encoder
    texts = [document.semantic_texts[0] for document in tool_documents(all_specs)]

    start = time.perf_counter()
    before = rss_mb()
    tokens = [m.astype(np.float16) for m in encoder.encode_tokens(texts, layers=args.layer)]
    built_s = time.perf_counter() - start
    stored_mb = sum(m.nbytes for m in tokens) / 1e6
    mean = np.concatenate(tokens).astype(np.float32).mean(axis=0) if args.center else None
    print(
        f"token states: {sum(len(m) for m in tokens)} rows, {stored_mb:.1f} MB as float16, "
        f"{built_s:.0f} s (RSS +{rss_mb() - before:.0f} MB)"
    )

    def unit(x: Any) -> Any:
        x = x.astype(np.float32) if mean is None else x.astype(np.float32) - mean
        return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-9)

    weights = [float(w) for w in args.weights.split(",")]
    ranks: dict[float, dict[str, list[int | None]]] = {w: {} for w in [0.0, *weights]}
    maxsim_ms, query_ms = [], []
    for task in tasks:
        query = task["query"]
        blend = hybrid.scores(query)
        top = sorted(blend.items(), key=lambda item: (-item[1], item[0]))
        pool = top[: args.candidates]
        start = time.perf_counter()
        query_tokens = unit(encoder.encode_tokens([query], layers=args.layer)[0])
        query_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        sims = np.array([(query_tokens @ unit(tokens[p]).T).max(axis=1).mean() for p, _ in pool])
        maxsim_ms.append((time.perf_counter() - start) * 1000)
        if args.z:
            sims = (sims - sims.mean()) / (sims.std() + 1e-9)
        for weight, by_style in ranks.items():
            scored = sorted(
                (
                    (score + weight * float(sim), p)
                    for (p, score), sim in zip(pool, sims, strict=True)
                ),
                key=lambda item: (-item[0], item[1]),
            )
            order = [p for _, p in scored] + [p for p, _ in top[args.candidates :]]
            hits = [hybrid.entries[p] for p in order[:10]]
            rank = task_rank(hits, task, servers[task["spec"]])
            for style in ("all", task["style"]):
                by_style.setdefault(style, []).append(rank)

    print(
        f"per query: token states {statistics.median(query_ms):.1f} ms, MaxSim over "
        f"{args.candidates} candidates {statistics.median(maxsim_ms):.1f} ms (medians)"
    )
    print("weight  dev r@1 / r@5 / r@10, MRR@10   paraphrase r@5")
    for weight, by_style in ranks.items():
        row, para = summarize(by_style["all"]), summarize(by_style["paraphrase"])
        label = "default" if weight == 0.0 else f"{weight:g}"
        print(
            f"{label:<7} {row['r@1']:.3f} / {row['r@5']:.3f} / {row['r@10']:.3f}, "
            f"{row['mrr']:.3f}        {para['r@5']:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

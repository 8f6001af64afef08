"""Tool-search benchmark over the three real specs (Cloudflare, GitHub, Stripe) in one catalog.

Reports: time to index each spec, search latency p50/p95 over all three together (the hybrid
index both with its query-embedding cache emptied before each search and for repeated queries),
recall@5 and MRR@10 for a plain BM25 baseline (summary + description only), codemode's lexical
index, and lexical + semantic re-ranking; per spec and overall, on the splits of
benchmarks/search_tasks.json (dev; heldout, every third task per spec) and of
benchmarks/search_tasks_fresh.json (fresh: written before any change was measured on it, never
tuned on). `--tune` grid-searches the blend on the dev split only.

    .venv/bin/python benchmarks/search.py [--specs DIR] [--tasks FILE]... [--json] [--tune]
        [--cache-dir EMPTY_DIR]  # an empty directory measures the uncached embedding time
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from codemode.search.base import Hit, SearchIndex
from codemode.search.fts import FtsIndex
from codemode.tools import ToolSpec

HERE = Path(__file__).resolve().parent
TASKS = (HERE / "search_tasks.json", HERE / "search_tasks_fresh.json")
SPECS_DIR = HERE.parent / "tests" / "data" / "specs"


def load_specs(path: Path) -> tuple[str, list[ToolSpec], float]:
    """``(server, specs, seconds)`` through the project's OpenAPI connector."""
    from codemode.catalog.loading import server_name_for_spec
    from codemode.connectors.openapi import load_spec, operations_to_specs

    server = server_name_for_spec(path)
    start = time.perf_counter()
    specs = operations_to_specs(server, load_spec(path))
    return server, specs, time.perf_counter() - start


def evaluate(
    search: Callable[[str, int], list[Hit]],
    tasks: Sequence[dict[str, Any]],
    servers: dict[str, str],
) -> dict[str, dict[str, float]]:
    """recall@5 and MRR@10 per (split, spec) group; split 'orig' is dev + heldout, 'all' is all."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for task in tasks:
        hits = search(task["query"], 10)
        expected = set(task["expected"])
        server = servers[task["spec"]]
        rank = next(
            (i for i, h in enumerate(hits, 1) if h.server == server and h.operation_id in expected),
            None,
        )
        row = (1.0 if rank and rank <= 5 else 0.0, 1.0 / rank if rank else 0.0)
        splits = [task["split"], "all"] + (["orig"] if task["split"] in ("dev", "heldout") else [])
        for key in [f"{split}/{spec}" for split in splits for spec in (task["spec"], "all")]:
            groups.setdefault(key, []).append(row)
    return {
        key: {
            "n": len(rows),
            "recall@5": round(statistics.fmean(r for r, _ in rows), 3),
            "mrr": round(statistics.fmean(m for _, m in rows), 3),
        }
        for key, rows in sorted(groups.items())
    }


def latency(
    index: SearchIndex, queries: Sequence[str], rounds: int = 5, *, cold: bool = True
) -> dict[str, float]:
    """p50/p95 per search. ``cold``: the hybrid index's query-embedding cache is emptied
    before every search, so each one pays for the encoder (the honest first-search cost)."""
    forget = getattr(index, "forget_queries", None) if cold else None
    samples = []
    for query in queries if not cold else queries[:5]:
        index.search(query, 5)  # warm up (every query when measuring repeated queries)
    for _ in range(rounds):
        for query in queries:
            if forget is not None:
                forget()
            start = time.perf_counter()
            index.search(query, 5)
            samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {
        "p50_ms": round(samples[len(samples) // 2], 2),
        "p95_ms": round(samples[int(len(samples) * 0.95)], 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--specs", type=Path, default=SPECS_DIR)
    parser.add_argument(
        "--tasks",
        type=Path,
        action="append",
        help="task file (repeatable); default: search_tasks.json and search_tasks_fresh.json",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tune", action="store_true", help="grid-search the blend on dev")
    parser.add_argument("--no-semantic", action="store_true")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        help="embedding cache directory (an empty one measures the uncached build time)",
    )
    args = parser.parse_args(argv)

    suites = [json.loads(path.read_text()) for path in args.tasks or TASKS]
    suite = suites[0]
    tasks = [task for each in suites for task in each["tasks"]]
    report: dict[str, Any] = {"tasks": len(tasks), "specs": {}}
    servers: dict[str, str] = {}
    all_specs: list[ToolSpec] = []
    for key, filename in suite["specs"].items():
        server, specs, load_s = load_specs(args.specs / filename)
        servers[key] = server
        start = time.perf_counter()
        FtsIndex().add(specs)
        index_s = time.perf_counter() - start
        report["specs"][key] = {
            "operations": len(specs),
            "load_s": round(load_s, 3),
            "index_s": round(index_s, 3),
        }
        all_specs += specs
        log(f"{key}: {len(specs)} operations, load {load_s:.2f} s, index {index_s:.2f} s")

    results: dict[str, Any] = {}
    baseline = FtsIndex({"summary": 1.0, "description": 1.0}, synonyms=False, prefix=False)
    baseline.add(all_specs)
    results["baseline_bm25"] = evaluate(baseline.search, tasks, servers)

    lexical = FtsIndex()
    start = time.perf_counter()
    lexical.add(all_specs)
    report["index_all_s"] = round(time.perf_counter() - start, 3)
    report["lexical_latency"] = latency(lexical, [t["query"] for t in tasks])
    results["lexical"] = evaluate(lexical.search, tasks, servers)

    if not args.no_semantic:
        from codemode.search.semantic import HybridIndex

        hybrid = HybridIndex(lexical=FtsIndex(), cache_dir=args.cache_dir)
        start = time.perf_counter()
        hybrid.add(all_specs)
        report["hybrid_index_all_s"] = round(time.perf_counter() - start, 3)
        log(
            f"hybrid index (embeddings, cached after the first run): {report['hybrid_index_all_s']} s"
        )
        report["hybrid_latency"] = latency(hybrid, [t["query"] for t in tasks])
        report["hybrid_latency_repeated_query"] = latency(
            hybrid, [t["query"] for t in tasks], cold=False
        )
        results["lexical+semantic"] = evaluate(hybrid.search, tasks, servers)
        if args.tune:
            report["tuning_dev"] = tune(hybrid, [t for t in tasks if t["split"] == "dev"], servers)

    report["results"] = results
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_report(report)
    return 0


def tune(hybrid: Any, dev: list[dict[str, Any]], servers: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for alpha in (0.0, 0.1, 0.2, 0.3, 0.5):
        for candidates in (20, 50, 100):
            hybrid.alpha, hybrid.candidates = alpha, candidates
            score = evaluate(hybrid.search, dev, servers)["dev/all"]
            rows.append({"alpha": alpha, "candidates": candidates, **score})
    from codemode.search.semantic import DEFAULT_ALPHA, DEFAULT_CANDIDATES

    hybrid.alpha, hybrid.candidates = DEFAULT_ALPHA, DEFAULT_CANDIDATES
    rows.sort(key=lambda r: (-r["recall@5"], -r["mrr"]))
    return rows[:8]


def log(message: str) -> None:
    print(message, file=sys.stderr)


def print_report(report: dict[str, Any]) -> None:
    print(f"tasks: {report['tasks']}")
    for key, row in report["specs"].items():
        print(
            f"  {key:<11} {row['operations']:>5} ops  load {row['load_s']:.2f} s  index {row['index_s']:.3f} s"
        )
    print(f"lexical index over all: {report['index_all_s']} s")
    if "hybrid_index_all_s" in report:
        print(
            f"hybrid index over all (embeddings from cache if any): {report['hybrid_index_all_s']} s"
        )
    print(f"lexical search over all: {report['lexical_latency']}")
    if "hybrid_latency" in report:
        print(f"lexical+semantic search over all: {report['hybrid_latency']}")
        print(
            "lexical+semantic, query seen before (embedding cached): "
            f"{report['hybrid_latency_repeated_query']}"
        )
    specs = ["cloudflare", "github", "stripe", "all"]
    print(f"\n{'method':<18} {'split':<8} " + " ".join(f"{s:>16}" for s in specs))
    for method, groups in report["results"].items():
        for split in ("dev", "heldout", "orig", "fresh", "all"):
            cells = []
            for spec in specs:
                g = groups.get(f"{split}/{spec}")
                cells.append(f"R{g['recall@5']:.2f} M{g['mrr']:.2f} n{g['n']:<3}" if g else "-")
            print(f"{method:<18} {split:<8} " + " ".join(f"{c:>16}" for c in cells))
    for row in report.get("tuning_dev", []):
        print("tune", row)


if __name__ == "__main__":
    sys.exit(main())

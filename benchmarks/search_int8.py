"""Queries on 8-bit weights against float32 ones (``search/int8.py``): speed, closeness, recall.

One process, both encoders on ONNX Runtime (one thread), over the same prepared weights:

* the query pass for a short query and a 25-token one, the two taking turns (medians of
  ``--runs`` runs each);
* the cosine between the two vectors of each of the benchmark's 334 queries (min, 5th
  percentile, median), per split;
* recall@1/5/10 and MRR@10 per split of the hybrid search with each, over the same stored tool
  vectors (the index ``benchmarks/search.py`` builds: 8-bit tool texts since they became the
  default; the tables in docs/search.md were measured over float32 ones).

    PYTHONPATH=src .venv/bin/python benchmarks/search_int8.py [--runs 300] [--no-recall]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search import load_catalog
from search_eval import DEV, HELDOUT, evaluate, load_tasks

SHORT = "give a customer their money back"
LONG = (
    "list every DNS record of my zone that points at the old origin server so I can update "
    "them before the migration"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--no-recall", action="store_true")
    parser.add_argument(
        "--smoke", action="store_true", help="one run, 4 queries, no recall: does it still run"
    )
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.no_recall = 1, True

    import numpy as np

    from codemode.search.encoder import MiniLMEncoder
    from codemode.search.semantic import (
        DOCUMENT_MAX_TOKENS,
        HybridIndex,
        build_index,
        open_stored_index,
    )
    from codemode.search.store import catalog_fingerprint, default_cache_dir

    cache_dir = default_cache_dir()
    encoders = {
        precision: MiniLMEncoder(
            max_length=DOCUMENT_MAX_TOKENS, cache_dir=cache_dir, query_precision=precision
        )
        for precision in ("float32", "int8")
    }
    for precision, encoder in encoders.items():
        if encoder.query_precision != precision or encoder.backend != "onnx":
            raise SystemExit(f"no {precision} query pass on ONNX Runtime here")
    print(f"load average at start {[round(x, 2) for x in os.getloadavg()]}")

    for text in (SHORT, LONG):
        tokens = len(encoders["int8"]._token_ids([text])[0])
        times = race({name: e.encode_query for name, e in encoders.items()}, text, args.runs)
        cells = ", ".join(f"{name} {value:.2f} ms" for name, value in times.items())
        print(f"query pass, {tokens} tokens, median of {args.runs}: {cells}")

    specfiles, tasks = load_tasks([DEV, HELDOUT])
    if args.smoke:
        tasks = [t for split in ("dev", "heldout") for t in tasks if t["split"] == split][:2] + [
            t for t in tasks if t["split"] == "heldout"
        ][:2]
    for split in ("dev", "heldout"):
        cosines = [
            float(
                encoders["int8"].encode_query(t["query"])
                @ encoders["float32"].encode_query(t["query"])
            )
            for t in tasks
            if t["split"] == split
        ]
        print(
            f"cosine int8 / float32, {split} ({len(cosines)} queries): min {min(cosines):.4f}, "
            f"p5 {np.percentile(cosines, 5):.4f}, median {statistics.median(cosines):.4f}"
        )

    if not args.no_recall:
        servers, tools = load_catalog(specfiles)
        specs = [spec for loaded in tools.values() for spec in loaded]
        build_index(specs, semantic=True, cache_dir=cache_dir)  # stores it once
        for precision, encoder in encoders.items():
            index = open_stored_index(
                catalog_fingerprint(specs), semantic=True, cache_dir=cache_dir, encoder=encoder
            )
            assert isinstance(index, HybridIndex)
            groups = evaluate(index.search, tasks, servers)
            for split in ("dev", "heldout"):
                g = groups[f"{split}/all/all"]
                print(
                    f"recall {precision:<7} {split:<7} r@1 {g['r@1']:.3f}  r@5 {g['r@5']:.3f}  "
                    f"r@10 {g['r@10']:.3f}  MRR {g['mrr']:.3f}  n{g['n']}"
                )
    print(f"load average at end {[round(x, 2) for x in os.getloadavg()]}")
    return 0


def race(functions: dict[str, Callable[[str], Any]], text: str, runs: int) -> dict[str, float]:
    """Median milliseconds of each function on ``text``, the functions taking turns."""
    samples: dict[str, list[float]] = {name: [] for name in functions}
    for function in functions.values():
        function(text)
    for _ in range(runs):
        for name, function in functions.items():
            start = time.perf_counter()
            function(text)
            samples[name].append((time.perf_counter() - start) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


if __name__ == "__main__":
    sys.exit(main())

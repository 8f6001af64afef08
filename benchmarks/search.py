"""Tool-search benchmark over the three real specs (Cloudflare, GitHub, Stripe: 3,224 operations).

Quality: recall@1/5/10 and MRR@10 by split (dev: tuning allowed; heldout: frozen, never tuned
on), by style (api words / paraphrase) and by spec, for plain BM25 (summary + description),
codemode's lexical index and the hybrid index (see benchmarks/search_eval.py for the scoring).
Speed: the median of each search stage, the stored index's load time and memory, the first
search of a fresh ``LiveIndex`` (a gateway after restart), and a cold ``codemode search`` process
(interpreter start included) next to the cost of importing numpy and tokenizers alone.

    .venv/bin/python benchmarks/search.py [--json] [--no-semantic] [--no-cli] [--rounds N]
        [--cache-dir DIR]  # default: the user cache; an empty one measures the uncached build
        [--query-precision int8|float32]  # the queries' weights on ONNX Runtime (default int8)
        [--first-index N]  # N rounds of a first index (empty cache) with both views and with
                           # the default one, taking turns: wall, CPU, and each one's quality
        [--document-precision int8|float32]  # the tool texts' pass in those (default int8)

With 8-bit queries (the default) the latency table also times the float32 query pass and a new
query's hybrid search on it, taking turns with the others.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_eval import DEV, HELDOUT, evaluate, first_answer, load_tasks, pool_recall

from codemode.search.fts import FtsIndex
from codemode.tools import ToolSpec

HERE = Path(__file__).resolve().parent
SPECS_DIR = HERE.parent / "tests" / "data" / "specs"
SPECS = ("cloudflare", "github", "stripe", "all")


def load_specs(path: Path) -> tuple[str, list[ToolSpec], float]:
    """``(server, specs, seconds)`` through the project's OpenAPI connector."""
    from codemode.catalog.loading import server_name_for_spec
    from codemode.connectors.openapi import load_spec, operations_to_specs

    server = server_name_for_spec(path)
    start = time.perf_counter()
    specs = operations_to_specs(server, load_spec(path))
    return server, specs, time.perf_counter() - start


def load_catalog(
    specfiles: dict[str, str], specs_dir: Path = SPECS_DIR
) -> tuple[dict[str, str], dict[str, list[ToolSpec]]]:
    """The tasks' specs (``load_tasks``'s first value) as ``(server by spec key, tools by spec
    key)``: each server's tools stay together, as ``tool_documents`` names them per server."""
    servers: dict[str, str] = {}
    tools: dict[str, list[ToolSpec]] = {}
    for key, filename in specfiles.items():
        servers[key], tools[key], _ = load_specs(specs_dir / filename)
    return servers, tools


def measure(
    functions: dict[str, Callable[[str], object]], queries: Sequence[str], rounds: int
) -> dict[str, dict[str, float]]:
    """Median and p95 per function of ``function(query)``. The functions take turns on each
    query, so a machine whose load changes during the run slows them all alike."""
    samples: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(rounds):
        for query in queries:
            for name, function in functions.items():
                start = time.perf_counter()
                function(query)
                samples[name].append((time.perf_counter() - start) * 1000)
    out = {}
    for name, values in samples.items():
        values.sort()
        out[name] = {
            "p50_ms": round(statistics.median(values), 3),
            "p95_ms": round(values[int(len(values) * 0.95)], 3),
        }
    return out


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--specs", type=Path, default=SPECS_DIR)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-semantic", action="store_true")
    parser.add_argument("--no-cli", action="store_true", help="skip the cold CLI runs")
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds over all queries")
    parser.add_argument("--cli-runs", type=int, default=7)
    parser.add_argument("--cache-dir", type=Path, help="embedding and index cache directory")
    parser.add_argument(
        "--query-precision",
        choices=("int8", "float32"),
        default="int8",
        help="weights of the query pass on ONNX Runtime (tool vectors: the default, 8-bit)",
    )
    parser.add_argument(
        "--document-precision",
        choices=("int8", "float32"),
        default="int8",
        help="arithmetic of the tool texts' pass on ONNX Runtime in the --first-index builds",
    )
    parser.add_argument(
        "--first-index",
        type=int,
        default=0,
        metavar="N",
        help="time N first indexes (empty cache directories) to the prose stage and to both views",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="lexical, one spec, one round: does it still run"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.no_semantic, args.no_cli, args.rounds = True, True, 1

    specfiles, tasks = load_tasks([DEV, HELDOUT])
    if args.smoke:  # the smallest spec and ten of its tasks
        specfiles = {"stripe": specfiles["stripe"]}
        tasks = [task for task in tasks if task["spec"] == "stripe"][:10]
    queries = [task["query"] for task in tasks]
    report: dict[str, Any] = {"tasks": len(tasks), "specs": {}, "latency": {}, "results": {}}
    report["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    servers: dict[str, str] = {}
    all_specs: list[ToolSpec] = []
    spec_paths = []
    for key, filename in specfiles.items():
        server, specs, load_s = load_specs(args.specs / filename)
        servers[key] = server
        spec_paths.append(args.specs / filename)
        report["specs"][key] = {"operations": len(specs), "load_s": round(load_s, 3)}
        all_specs += specs
        log(f"{key}: {len(specs)} operations, load {load_s:.2f} s")

    baseline = FtsIndex({"summary": 1.0, "description": 1.0}, synonyms=False, prefix=False)
    baseline.add(all_specs)
    report["results"]["bm25 baseline"] = evaluate(baseline.search, tasks, servers)

    lexical = FtsIndex()
    start = time.perf_counter()
    lexical.add(all_specs)
    report["lexical_build_s"] = round(time.perf_counter() - start, 3)
    report["results"]["lexical"] = evaluate(lexical.search, tasks, servers)
    if args.no_semantic:
        report["first_answer"] = first_answer(lexical.search, lexical.entries, tasks, servers)
        report["latency"] = measure(
            {"lexical search (total)": lambda q: lexical.search(q, 5)}, queries, args.rounds
        )

    if not args.no_semantic and args.first_index:
        first_index_stage(
            report, all_specs, tasks, servers, args.first_index, args.document_precision
        )
    if not args.no_semantic:
        semantic_stages(report, all_specs, tasks, servers, queries, args)
    if not args.no_cli:
        cli_stages(report, spec_paths, args)

    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["cpus"] = os.cpu_count()
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_report(report)
    return 0


def semantic_stages(
    report: dict[str, Any],
    all_specs: list[ToolSpec],
    tasks: list[dict[str, Any]],
    servers: dict[str, str],
    queries: list[str],
    args: argparse.Namespace,
) -> None:
    import numpy as np

    from codemode.search.encoder import MiniLMEncoder
    from codemode.search.live import LiveIndex
    from codemode.search.semantic import (
        DOCUMENT_MAX_TOKENS,
        HybridIndex,
        build_index,
        open_stored_index,
    )
    from codemode.search.store import catalog_fingerprint, default_cache_dir

    cache_dir = args.cache_dir or default_cache_dir()
    start = time.perf_counter()
    fingerprint = catalog_fingerprint(all_specs)
    report["fingerprint_s"] = round(time.perf_counter() - start, 3)
    start = time.perf_counter()
    built = build_index(all_specs, semantic=True, cache_dir=cache_dir)
    report["hybrid_build_or_open_s"] = round(time.perf_counter() - start, 3)
    log(
        f"hybrid index (embeddings cached after the first run): {report['hybrid_build_or_open_s']} s"
    )
    del built

    before = rss_mb()
    start = time.perf_counter()
    encoder = MiniLMEncoder(
        max_length=DOCUMENT_MAX_TOKENS, cache_dir=cache_dir, query_precision=args.query_precision
    )
    hybrid = open_stored_index(fingerprint, semantic=True, cache_dir=cache_dir, encoder=encoder)
    assert isinstance(hybrid, HybridIndex)
    hybrid.search("warm up", 5)
    report["stored_open_s"] = round(time.perf_counter() - start, 3)
    report["index_memory_mb"] = round(rss_mb() - before, 1)
    report["encoder_backend"] = hybrid.encoder.backend
    report["query_precision"] = hybrid.encoder.query_precision

    report["results"]["lexical+semantic"] = evaluate(hybrid.search, tasks, servers)
    report["first_answer"] = first_answer(hybrid.search, hybrid.entries, tasks, servers)

    # How far re-ranking could go: is every needed operation among the candidates the blend
    # sees (lexical top N and cosine top N, merged)?
    entries = hybrid.entries

    def candidates(query: str, size: int) -> set[tuple[str, str | None]]:
        positions = {p for p, _ in hybrid.lexical.ranked(query, size)}
        cosine = hybrid.vectors @ hybrid.query_vector(query)
        positions |= set(np.argpartition(-cosine, size - 1)[:size].tolist())
        return {(entries[p].server, entries[p].operation_id) for p in positions}

    report["candidate_pool"] = pool_recall(candidates, tasks, servers)

    # Learning from use: the dev tasks' answers recorded as successful calls after their
    # queries, then the held-out tasks searched through the LiveIndex with that UsageLog.
    from codemode.search.usage import UsageLog

    learning = LiveIndex(all_specs, cache_dir=cache_dir, usage=UsageLog()).start()
    if learning._hybrid is not None:
        learning._hybrid.encoder = hybrid.encoder  # the same query precision
    by_operation = {(e.server, e.operation_id): e.tool for e in hybrid.entries}
    for task in tasks:
        if task["split"] != "dev":
            continue
        server = servers[task["spec"]]
        for group in task["needs"]:
            tool = by_operation.get((server, group[0]))
            if tool is not None:
                learning.record_use(task["query"], server, tool, True)
    heldout = [task for task in tasks if task["split"] == "heldout"]
    report["results"]["+ usage (dev uses)"] = evaluate(learning.search, heldout, servers)

    encoder = hybrid.encoder
    vector = encoder.encode_query("refund a charge")

    def cosine(query: str) -> None:
        with encoder.blas_threads():
            np.argpartition(-(hybrid.vectors @ vector), 99)[:100]

    def new_query(query: str) -> None:
        hybrid.forget_queries()
        hybrid.search(query, 5)

    def with_usage(query: str) -> None:
        learning.forget_queries()
        learning.search(query, 5)

    stages: dict[str, Callable[[str], object]] = {
        "lexical search (total)": lambda q: hybrid.lexical.search(q, 5),
        "lexical ranking (stage)": lambda q: hybrid.lexical.ranked(q, hybrid.candidates),
        "query embedding (stage)": encoder.encode_query,
        "cosine + top-k (stage)": cosine,
        "hybrid search, new query (total)": new_query,
        # right after new_query: the query's embedding is cached
        "hybrid search, repeated query (total)": lambda q: hybrid.search(q, 5),
        "hybrid + usage re-rank, new query (total)": with_usage,
    }
    if encoder.query_precision == "int8":  # the float32 query pass, taking turns with it
        float32 = MiniLMEncoder(
            max_length=DOCUMENT_MAX_TOKENS, cache_dir=cache_dir, query_precision="float32"
        )
        on_float32 = open_stored_index(
            fingerprint, semantic=True, cache_dir=cache_dir, encoder=float32
        )
        assert isinstance(on_float32, HybridIndex)

        def new_float32_query(query: str) -> None:
            on_float32.forget_queries()
            on_float32.search(query, 5)

        stages["query embedding, float32 weights (stage)"] = float32.encode_query
        stages["hybrid search, new query, float32 weights (total)"] = new_float32_query
    latency = report["latency"]
    latency.update(measure(stages, queries, args.rounds))

    # A gateway after a restart: specs in memory, index stored. ``start()`` runs when the
    # gateway starts (fingerprint, open the stored index, load the model); then its first search.
    starts, firsts = [], []
    for query in queries[:5]:
        start = time.perf_counter()
        live = LiveIndex(all_specs, cache_dir=cache_dir).start()
        starts.append((time.perf_counter() - start) * 1000)
        assert live.status.mode == "hybrid"
        start = time.perf_counter()
        live.search(query, 5)
        firsts.append((time.perf_counter() - start) * 1000)
    latency["gateway restart: LiveIndex.start() with a stored index"] = {
        "p50_ms": round(statistics.median(starts), 1)
    }
    latency["gateway restart: first search after start"] = {
        "p50_ms": round(statistics.median(firsts), 1)
    }


def first_index_stage(
    report: dict[str, Any],
    all_specs: list[ToolSpec],
    tasks: list[dict[str, Any]],
    servers: dict[str, str],
    rounds: int,
    precision: str = "int8",
) -> None:
    """First indexes as ``build_index`` makes them (lexical table, model weights prepared, tools
    embedded in two stages, each stage stored), each in an empty cache directory: wall time and
    this process's CPU time (ONNX Runtime's threads included) until the prose stage answers
    and until the whole index does, tool texts embedded at ``precision``. The first round also
    scores both stages' answers."""
    names = ("prose stage (first semantic answers)", "both views (the whole index)")
    rows: dict[str, dict[str, Any]] = {name: {"wall_s": [], "cpu_s": []} for name in names}
    loads = []
    for round_ in range(rounds):
        loads.append(round(os.getloadavg()[0], 2))
        with tempfile.TemporaryDirectory() as directory:
            stages = first_index_round(all_specs, Path(directory), precision)
            log(
                f"first index: prose stage {stages[0][1]:.1f} s, whole {stages[1][1]:.1f} s "
                f"wall ({stages[0][2]:.1f} and {stages[1][2]:.1f} s CPU; load {loads[-1]})"
            )
            for name, (index, wall, cpu) in zip(names, stages, strict=True):
                rows[name]["wall_s"].append(round(wall, 1))
                rows[name]["cpu_s"].append(round(cpu, 1))
                if round_ == 0:  # scored here: the query weights live in this directory
                    rows[name]["first_answer"] = first_answer(
                        index.search, index.entries, tasks, servers
                    )
                    rows[name]["results"] = evaluate(index.search, tasks, servers)
    for row in rows.values():
        row["load_1min"] = loads
        row["wall_median_s"] = round(statistics.median(row["wall_s"]), 1)
        row["cpu_median_s"] = round(statistics.median(row["cpu_s"]), 1)
    report["first_index"] = rows
    report["first_index_document_precision"] = precision


def first_index_round(
    all_specs: list[ToolSpec], cache_dir: Path, precision: str = "int8"
) -> list[tuple[Any, float, float]]:
    """One first index in ``cache_dir``: each stage's index, with the wall and CPU seconds from
    the start until it was ready (stored)."""
    from codemode.search.documents import tool_documents
    from codemode.search.encoder import MiniLMEncoder
    from codemode.search.fts import FtsIndex
    from codemode.search.semantic import DOCUMENT_MAX_TOKENS, HybridIndex, build_stages
    from codemode.search.store import catalog_fingerprint

    def factory(**kwargs: Any) -> HybridIndex:
        if kwargs.get("encoder") is None:  # the first stage makes the encoder, as builds do
            kwargs["encoder"] = MiniLMEncoder(
                max_length=DOCUMENT_MAX_TOKENS,
                cache_dir=cache_dir,
                query_session="first_query",
                document_precision="float32" if precision == "float32" else "int8",
            )
        return HybridIndex(**kwargs)

    stages: list[tuple[Any, float, float]] = []
    wall, cpu = time.perf_counter(), time.process_time()

    def ready(index: HybridIndex) -> None:
        stages.append((index, time.perf_counter() - wall, time.process_time() - cpu))

    documents = tool_documents(all_specs)
    lexical = FtsIndex()
    lexical.add_documents(documents)
    build_stages(
        documents,
        lexical,
        cache_dir=cache_dir,
        fingerprint=catalog_fingerprint(all_specs),
        on_stage=ready,
        query_session="first_query",
        factory=factory,
    )
    return stages


def cli_stages(report: dict[str, Any], spec_paths: list[Path], args: argparse.Namespace) -> None:
    from codemode.search.store import default_cache_dir

    cache_dir = args.cache_dir or default_cache_dir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(HERE.parent / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["CODEMODE_CACHE_DIR"] = str(cache_dir)
    # The in-process path (benchmarks/cold_cli.py measures the search daemon), and no daemon
    # is left running after the benchmark.
    env["CODEMODE_SEARCH_DAEMON"] = "0"
    openapi = [arg for path in spec_paths for arg in ("--openapi", str(path))]
    flags = ["--no-semantic"] if args.no_semantic else []
    with tempfile.TemporaryDirectory() as workdir:
        env["CODEMODE_STATE_DIR"] = str(Path(workdir) / "state")

        def run(*command: str) -> float:
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, *command],
                cwd=workdir,
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
                timeout=1800,
            )
            return (time.perf_counter() - start) * 1000

        search = ["-m", "codemode", "search", "--json", "--limit", "5", *openapi, *flags]
        first = run(*search, "warm up the stored index")
        report["cli_first_search_s"] = round(first / 1000, 2)
        rows = {
            "python -c pass": ["-c", "pass"],
            "python -c 'import numpy, tokenizers'": ["-c", "import numpy, tokenizers"],
            "codemode --help": ["-m", "codemode", "--help"],
            "codemode search (stored index)": [*search, "give a customer their money back"],
        }
        cold: dict[str, list[float]] = {}
        for _ in range(args.cli_runs):
            for name, command in rows.items():
                cold.setdefault(name, []).append(run(*command))
        report["cold_process_ms"] = {
            name: round(statistics.median(samples), 1) for name, samples in cold.items()
        }


def log(message: str) -> None:
    print(message, file=sys.stderr)


HELDOUT_GROUPS = ("heldout/all/all", "heldout/paraphrase/all", "dev/all/all")


def print_report(report: dict[str, Any]) -> None:
    print(
        f"tasks: {report['tasks']}; {report['cpus']} CPUs, load average (1/5/15 min) at start "
        f"{report['load_average_at_start']}, at end {report['load_average_at_end']}"
    )
    for key, row in report["specs"].items():
        print(f"  {key:<11} {row['operations']:>5} ops  load {row['load_s']:.2f} s")
    for key in (
        "lexical_build_s",
        "fingerprint_s",
        "hybrid_build_or_open_s",
        "stored_open_s",
        "encoder_backend",
        "query_precision",
    ):
        if key in report:
            print(f"{key}: {report[key]}")
    if "index_memory_mb" in report:
        print(
            f"stored hybrid index in memory (RSS, model included): {report['index_memory_mb']} MB"
        )
    for name, row in report.get("first_index", {}).items():
        answer = row["first_answer"]
        held, para, dev = (row["results"][key] for key in HELDOUT_GROUPS)
        print(
            f"first index, {name}: wall {row['wall_median_s']} s (runs {row['wall_s']}), "
            f"CPU {row['cpu_median_s']} s (runs {row['cpu_s']}), load {row['load_1min']}; "
            f"first answer named: held-out {answer['heldout/all']['named']:.3f}, paraphrase "
            f"{answer['heldout/paraphrase']['named']:.3f}, dev {answer['dev/all']['named']:.3f}, "
            f"median {answer['heldout/all']['median_tokens']:.0f} tokens; held-out r@1/5/10 "
            f"{held['r@1']:.3f}/{held['r@5']:.3f}/{held['r@10']:.3f} MRR {held['mrr']:.3f}, "
            f"paraphrase r@5 {para['r@5']:.3f}, dev r@5 {dev['r@5']:.3f}"
        )
    print("\nlatency (median over every task query)")
    for name, row in report["latency"].items():
        print(f"  {name:<70} {row}")
    if "cold_process_ms" in report:
        print(
            f"\ncold processes (median of runs; first search built the store in "
            f"{report['cli_first_search_s']} s)"
        )
        for name, value in report["cold_process_ms"].items():
            print(f"  {name:<45} {value:>8.1f} ms")
    if "candidate_pool" in report:
        print(
            "\ncandidate pool (lexical top N and cosine top N merged) holding every needed operation"
        )
        for key, row in report["candidate_pool"].items():
            cells = "  ".join(f"{name} {value:.2f}" for name, value in row.items() if name != "n")
            print(f"  {key:<20} {cells}  n{row['n']}")
    if "first_answer" in report:
        print("\ndefault first answer (search tool defaults) naming every needed function")
        for key, row in report["first_answer"].items():
            print(
                f"  {key:<20} named {row['named']:.3f}  tokens median {row['median_tokens']:.0f}"
                f" p90 {row['p90_tokens']:.0f}  n{row['n']}"
            )
    print(f"\n{'method':<17} {'split/style':<20} " + " ".join(f"{s:>32}" for s in SPECS))
    for method, groups in report["results"].items():
        for split in ("dev", "heldout", "all"):
            for style in ("all", "api", "paraphrase"):
                cells = []
                for spec in SPECS:
                    g = groups.get(f"{split}/{style}/{spec}")
                    cells.append(
                        f"{g['r@1']:.2f}/{g['r@5']:.2f}/{g['r@10']:.2f}/{g['r@20']:.2f}"
                        f" M{g['mrr']:.2f} n{g['n']:<3}"
                        if g
                        else "-"
                    )
                print(
                    f"{method:<17} {split + '/' + style:<20} " + " ".join(f"{c:>32}" for c in cells)
                )
    print("cells: recall@1/recall@5/recall@10/recall@20, MRR@10, task count")


if __name__ == "__main__":
    sys.exit(main())

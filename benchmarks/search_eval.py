"""Task sets and scoring for the tool-search benchmark (used by benchmarks/search.py).

A task names its spec, a style ('api': the API's own words; 'paraphrase': a user's words) and
``needs``: groups of operation ids. A task is found at k when every group has one of its ids in
the top k (a two-step task needs both steps); its rank is the rank at which the last group is
first met, so MRR rewards having every needed operation near the top.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from codemode.search.base import Hit

HERE = Path(__file__).resolve().parent
DEV = HERE / "search_dev.json"
HELDOUT = HERE / "search_heldout.json"
KS = (1, 5, 10, 20)
POOL_SIZES = (20, 50, 100)


def load_tasks(paths: Sequence[Path]) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """``(spec files by key, tasks)``; each task carries the split of its file."""
    specs: dict[str, str] = {}
    tasks: list[dict[str, Any]] = []
    for path in paths:
        suite = json.loads(path.read_text())
        specs.update(suite["specs"])
        tasks += [{**task, "split": suite["split"]} for task in suite["tasks"]]
    return specs, tasks


def task_rank(hits: Sequence[Hit], task: dict[str, Any], server: str) -> int | None:
    """The rank (1-based) at which every needed group has been met, or None."""
    worst = 0
    for group in task["needs"]:
        wanted = set(group)
        rank = next(
            (i for i, h in enumerate(hits, 1) if h.server == server and h.operation_id in wanted),
            None,
        )
        if rank is None:
            return None
        worst = max(worst, rank)
    return worst


def evaluate(
    search: Callable[[str, int], list[Hit]],
    tasks: Sequence[dict[str, Any]],
    servers: dict[str, str],
) -> dict[str, dict[str, float]]:
    """recall@1/5/10 and MRR@10 per ``split/style/spec`` group ('all' aggregates)."""
    groups: dict[str, list[int | None]] = {}
    for task in tasks:
        rank = task_rank(search(task["query"], max(KS)), task, servers[task["spec"]])
        for split in (task["split"], "all"):
            for style in (task["style"], "all"):
                for spec in (task["spec"], "all"):
                    groups.setdefault(f"{split}/{style}/{spec}", []).append(rank)
    return {key: summarize(ranks) for key, ranks in sorted(groups.items())}


def pool_recall(
    candidates: Callable[[str, int], set[tuple[str, str | None]]],
    tasks: Sequence[dict[str, Any]],
    servers: dict[str, str],
    sizes: Sequence[int] = POOL_SIZES,
) -> dict[str, dict[str, float]]:
    """Per ``split/style``: the share of tasks whose every needed operation is among the
    candidates a re-ranker would see (``candidates(query, size)``: ``(server, operation id)``
    pairs). It bounds what any re-ranking of that pool can reach."""
    found: dict[str, dict[int, list[bool]]] = {}
    for task in tasks:
        server = servers[task["spec"]]
        for size in sizes:
            pool = candidates(task["query"], size)
            ok = all(any((server, op) in pool for op in group) for group in task["needs"])
            for split in (task["split"], "all"):
                for style in (task["style"], "all"):
                    found.setdefault(f"{split}/{style}", {}).setdefault(size, []).append(ok)
    return {
        key: {f"pool@{size}": round(statistics.fmean(oks), 3) for size, oks in by_size.items()}
        | {"n": len(next(iter(by_size.values())))}
        for key, by_size in sorted(found.items())
    }


def summarize(ranks: Sequence[int | None]) -> dict[str, float]:
    row: dict[str, float] = {"n": len(ranks)}
    for k in KS:
        row[f"r@{k}"] = round(statistics.fmean(1.0 if r and r <= k else 0.0 for r in ranks), 3)
    row["mrr"] = round(statistics.fmean(1.0 / r if r and r <= 10 else 0.0 for r in ranks), 3)
    return row


def names_function(text: str, module: str, function: str) -> bool:
    """Whether an answer's text names ``module.function``: in full (the hits with signatures),
    or in its tail's ``module: a, b, c`` line."""
    if re.search(rf"(?<![\w.]){re.escape(module)}\.{re.escape(function)}(?!\w)", text):
        return True
    prefix = f"{module}: "
    return any(
        function in line[len(prefix) :].split(", ")
        for line in text.splitlines()
        if line.startswith(prefix)
    )


def default_answer(search: Callable[[str, int], list[Hit]], query: str) -> str:
    """The text the ``search`` tool returns for ``query`` at its defaults (the code before the
    tail, without ``answer_size``: the top ``DEFAULT_LIMIT`` with signatures)."""
    from codemode.search import render

    if not hasattr(render, "answer_size"):
        from codemode.search.base import DEFAULT_LIMIT

        return render.render_answer(search(query, DEFAULT_LIMIT))
    hits = search(query, render.answer_size(query, "summary", render.DEFAULT_HEAD))
    return render.render_answer(hits, head=render.answer_head(query, hits, render.DEFAULT_HEAD))


def first_answer(
    search: Callable[[str, int], list[Hit]],
    entries: Sequence[Hit],
    tasks: Sequence[dict[str, Any]],
    servers: dict[str, str],
) -> dict[str, dict[str, float]]:
    """Per ``split/style``: the share of tasks whose default answer names every needed function
    (one accepted operation of each group, anywhere in the text), and the answer's median and
    90th-percentile size in o200k tokens."""
    from codemode.tokens import count_tokens_many

    by_operation = {(entry.server, entry.operation_id): entry for entry in entries}
    texts = [default_answer(search, task["query"]) for task in tasks]
    sizes = count_tokens_many(texts)
    groups: dict[str, list[tuple[bool, int]]] = {}
    for task, text, size in zip(tasks, texts, sizes, strict=True):
        server = servers[task["spec"]]
        named = all(
            any(
                (entry := by_operation.get((server, operation))) is not None
                and names_function(text, entry.module, entry.function)
                for operation in group
            )
            for group in task["needs"]
        )
        for split in (task["split"], "all"):
            for style in (task["style"], "all"):
                groups.setdefault(f"{split}/{style}", []).append((named, size))
    out: dict[str, dict[str, float]] = {}
    for key, rows in sorted(groups.items()):
        ordered = sorted(size for _, size in rows)
        out[key] = {
            "n": len(rows),
            "named": round(statistics.fmean(1.0 if named else 0.0 for named, _ in rows), 3),
            "median_tokens": statistics.median(ordered),
            "p90_tokens": ordered[int(len(ordered) * 0.9)],
        }
    return out

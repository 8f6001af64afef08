"""Precision and recall of the privacy layer on the generated customer corpus.

    .venv/bin/python benchmarks/privacy_precision.py [--records N] [--seed S] [--json]

The corpus (``tests/privacy/precision_corpus.py``): customers whose names, companies and
websites share words with their e-mail addresses (``Kofi Okafor``, ``kofi.okafor3@...``).
One session's vault takes every record in turn, as tool results of one server.

Rows:
  false replacements  kept fields (names, companies, cities, ids, dates, notes ...) that came
                      back changed: in the result that carried the record, when the same
                      value comes back alone later (``SELECT 'Kofi Okafor'``), and when the
                      code prints it (goal: 0 everywhere)
  missed              hidden fields (e-mail, phone) that came back in clear
  recall              each leak shape of ``precision_corpus.leaks`` (case, markup, spacing,
                      slugs, truncation) printed by the code: the share replaced by the
                      record's own token, and the share where another record's token showed
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codemode.privacy import PrivacyInvoker, PrivacySettings, Vault
from codemode.tools import ToolCall
from tests.privacy.precision_corpus import KEPT, leaks, records


class _Rows:
    def __init__(self, rows: list[dict[str, str]]) -> None:
        self.rows = rows

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        if call.tool == "get_customer":
            return self.rows[int(call.arguments["id"]) - 1]
        return {"result": call.arguments["value"]}


def measure(count: int, seed: int) -> dict[str, Any]:
    corpus = records(count, seed)
    upstream = _Rows([record.row() for record in corpus])
    invoker = PrivacyInvoker(upstream, Vault(), PrivacySettings())
    started = time.perf_counter()
    false: Counter[str] = Counter()
    missed: Counter[str] = Counter()
    examples: list[str] = []
    for record in corpus:
        got = invoker.invoke(
            ToolCall("crm", "get_customer", {"id": record.kept["id"]}), timeout_s=5
        )
        for key in KEPT:
            if got[key] != record.kept[key]:
                false["in the result"] += 1
                if len(examples) < 5:
                    examples.append(f"{record.kept[key]!r} -> {got[key]!r}")
        for key, value in record.hidden.items():
            if got[key] == value or value in json.dumps(got):
                missed[key] += 1
    for record in corpus:
        for key in KEPT:
            value = record.kept[key]
            again = invoker.invoke(ToolCall("crm", "echo", {"value": value}), timeout_s=5)
            if again["result"] != value:
                false["returned alone later"] += 1
            if invoker.scan_output(value) != value:
                false["printed"] += 1
    caught: Counter[str] = Counter()
    other: Counter[str] = Counter()
    shapes: Counter[str] = Counter()
    vault = invoker.vault
    for record in corpus:
        for field, shape, text in leaks(record):
            name = f"{field}/{shape}"
            shapes[name] += 1
            shown = invoker.scan_output(text)
            token = vault.token_of(record.hidden[field]) or "?"
            if token in shown:
                caught[name] += 1
            elif "<" in shown:
                other[name] += 1
    seconds = time.perf_counter() - started
    total_leaks = sum(shapes.values())
    return {
        "records": count,
        "kept_values_checked": count * len(KEPT) * 3,
        "false_replacements": dict(false),
        "false_total": sum(false.values()),
        "false_examples": examples,
        "missed": dict(missed),
        "recall": {name: round(caught[name] / n, 4) for name, n in sorted(shapes.items())},
        "recall_all": round(sum(caught.values()) / total_leaks, 4),
        "wrong_token": round(sum(other.values()) / total_leaks, 4),
        "seconds": round(seconds, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.records, args.seed)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['records']} records, {result['kept_values_checked']} kept values checked")
    print(f"false replacements: {result['false_total']} {result['false_replacements']}")
    for example in result["false_examples"]:
        print(f"  e.g. {example}")
    print(f"hidden values missed: {result['missed'] or 0}")
    print(f"recall (own token): {result['recall_all']:.4f}, another token: {result['wrong_token']}")
    for name, share in result["recall"].items():
        print(f"  {name:16} {share:.4f}")
    print(f"{result['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Precision and recall of the privacy layer on the generated customer corpus.

    .venv/bin/python benchmarks/privacy_precision.py [--records N] [--oracle-records N]
        [--seed S] [--json]

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
  oracle              through the session's wrapper chain, with the corpus's values in the
                      vault: per probe class (case, wildcards, whitespace, look-alike letters,
                      prefix, suffix, reversed), the share of jordan.blake@acme.example.com
                      confirmed when the guard stopped it and the calls it took; honest
                      batches (ids 1..1000 as SQL, 365 dates, 1,000 calls one character
                      apart, every customer's name): pauses; and the guard's time per call
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codemode.config import CodemodeConfig
from codemode.engine.chain import build_invoker_chain
from codemode.policy.outcome import PolicyRefusedError
from codemode.privacy import PrivacyInvoker, PrivacySettings, Vault
from codemode.privacy.oracle import OracleSettings
from codemode.privacy.recall import skeleton
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


SECRET = "jordan.blake@acme.example.com"
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789._@-"
LOOKALIKES = str.maketrans("aeopcxijs", "\u0430\u0435\u043e\u0440\u0441\u0445\u0456\u0458\u0455")
FOLD = str.maketrans("\u0430\u0435\u043e\u0440\u0441\u0445\u0456\u0458\u0455", "aeopcxijs", " ")


def _like(pattern: str, value: str) -> bool:
    """A tolerant search engine: LIKE with % and _, any case, look-alikes folded, no spaces."""
    import re

    pattern = pattern.casefold().translate(FOLD)
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value) is not None


_CASES = random.Random(7)


def _mixed(text: str) -> str:
    """Each call in another random case (``JoRdAn.B%``, ``jORdaN.b%``): no two alike."""
    return "".join(c.upper() if _CASES.random() < 0.5 else c for c in text)


PROBES: dict[str, tuple[Any, bool]] = {
    "prefix": (lambda known, c: f"{known}{c}%", True),
    "case": (lambda known, c: _mixed(known + c) + "%", True),
    "wildcards": (lambda known, c: "_" * len(known) + f"{c}%", True),
    "whitespace": (lambda known, c: " ".join(known + c) + " %", True),
    "look-alikes": (lambda known, c: (known + c).translate(LOOKALIKES) + "%", True),
    "suffix": (lambda known, c: f"%{c}{known}", False),
    "reversed": (lambda known, c: f"{(c + known)[::-1]}%", False),
}


class _Directory:
    """``list`` gives the corpus rows (and Jordan Blake), ``search``/``search_reversed`` are
    LIKE oracles on his address (a pattern) or a full-text search (anything else)."""

    def __init__(self, rows: list[dict[str, str]]) -> None:
        self.rows = rows
        self.calls = 0

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        self.calls += 1
        query = call.arguments.get("query", "")
        if call.tool == "list":
            return {"rows": self.rows}
        if call.tool == "search" and "%" in query:
            return {"found": _like(query, SECRET)}
        if call.tool == "search_reversed":
            return {"found": _like(query, SECRET[::-1])}
        return {"rows": []}


def _chain(rows: list[dict[str, str]]) -> tuple[Any, _Directory]:
    directory = _Directory(rows)
    oracle = OracleSettings(calls_per_session=100_000, calls_per_minute=100_000)
    config = CodemodeConfig(servers={}, privacy=PrivacySettings(oracle=oracle))
    invoker = build_invoker_chain(
        config, directory, session="bench", specs=lambda s, t: None, approver=None
    ).invoker
    invoker.invoke(ToolCall("crm", "list", {}), timeout_s=5)
    return invoker, directory


def oracle(count: int, seed: int) -> dict[str, Any]:
    rows = [{"name": "Jordan Blake", "email": SECRET}]
    rows += [record.row() for record in records(count, seed)]
    out: dict[str, Any] = {"probes": {}}
    size = len(skeleton(SECRET))
    for name, (guess, forward) in PROBES.items():
        invoker, directory = _chain(rows)
        tool = "search" if name != "reversed" else "search_reversed"
        known, stopped = "", False
        try:
            while len(known) < len(SECRET):
                for char in ALPHABET:
                    query = guess(known, char)
                    call = ToolCall("crm", tool, {"query": query})
                    if invoker.invoke(call, timeout_s=5)["found"]:
                        known = known + char if forward else char + known
                        break
                else:
                    break
        except PolicyRefusedError:
            stopped = True
        out["probes"][name] = {
            "stopped": stopped,
            "confirmed_share": round(len(skeleton(known)) / size, 3),
            "calls": directory.calls - 1,
        }
    invoker, directory = _chain(rows)
    honest = [f"SELECT * FROM customers WHERE id = {n}" for n in range(1, 1001)]
    honest += [f"2024-{d // 28 % 12 + 1:02d}-{d % 28 + 1:02d}" for d in range(365)]
    honest += [f"invoice-{n:04d}" for n in range(1000)]
    honest += [f"{row['name']}%" for row in rows]
    paused = 0
    started = time.perf_counter()
    for query in honest:
        try:
            invoker.invoke(ToolCall("crm", "search", {"query": query}), timeout_s=5)
        except PolicyRefusedError:
            paused += 1
    seconds = time.perf_counter() - started
    out["honest_calls"] = len(honest)
    out["honest_paused"] = paused
    out["ms_per_call"] = round(1000 * seconds / len(honest), 3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--oracle-records", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--smoke", action="store_true", help="100 records, 100 in the vault (a check that it runs)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.records, args.oracle_records = 100, 100
    result = measure(args.records, args.seed)
    result["oracle"] = oracle(args.oracle_records, args.seed)
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
    guard = result["oracle"]
    print(f"oracle probes on {SECRET} ({args.oracle_records} customers in the vault;")
    print("  confirmed counts words the code saw in clear too, such as com from websites):")
    for name, row in guard["probes"].items():
        state = "stopped" if row["stopped"] else "NOT stopped"
        print(
            f"  {name:12} {state:11} confirmed {row['confirmed_share']:.3f} in {row['calls']} calls"
        )
    print(f"honest calls: {guard['honest_calls']}, paused or refused: {guard['honest_paused']}")
    print(f"guard and privacy: {guard['ms_per_call']} ms per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

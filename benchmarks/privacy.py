"""The PII scan of 1 MB of text: the fast path against the whole-text scan, in one process.

    .venv/bin/python benchmarks/privacy.py [--repeat N] [--json]

Texts (1 MiB each, generated with a fixed seed):
  prose    sentences, JSON order records, contact lines with e-mail and phone, log lines with
           times, hex ids and IPv4 addresses (a mixed tool result or document)
  numeric  the same shapes with numbers in almost every sentence (a worst case: dates, ids
           and digit runs everywhere)
  clean    prose without any value to find

Rows: detect (the detectors alone: the old whole-text scan and the fast path, their ratio),
tokenize (a 1 MiB string through the tokenizer, as a tool result: old and new), rescan (the
same text again: the second scan is answered from the content-hash cache). Medians of
``--repeat`` runs; ms per MiB.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from codemode.privacy import PrivacySettings, Vault
from codemode.privacy.detectors import DetectorSet

SIZE = 1 << 20
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "with",
    "as",
    "by",
    "at",
    "from",
    "order",
    "status",
    "invoice",
    "customer",
    "shipped",
    "pending",
    "total",
    "amount",
    "item",
    "price",
    "version",
    "build",
    "release",
    "note",
    "see",
    "page",
    "chapter",
    "report",
    "team",
    "meeting",
    "please",
    "review",
    "attached",
    "project",
    "update",
    "contract",
    "renewal",
    "account",
    "support",
    "request",
    "thanks",
    "regards",
    "quarter",
    "revenue",
    "growth",
    "plan",
]


def mixed_text(size: int = SIZE, *, numbers: float = 0.03, seed: int = 7, pii: bool = True) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    while total < size:
        roll = rng.random()
        if roll < 0.70 or not pii:
            words = [
                str(rng.randint(1, 2030)) if rng.random() < numbers else rng.choice(WORDS)
                for _ in range(rng.randint(6, 24))
            ]
            part = " ".join(words).capitalize() + ". "
        elif roll < 0.85:
            record = {
                "id": f"ord-{rng.randint(10000, 99999)}",
                "qty": rng.randint(1, 9),
                "price": round(rng.random() * 100, 2),
                "date": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            }
            part = json.dumps(record) + "\n"
        elif roll < 0.92:
            name = rng.choice(["maria", "john", "li"])
            part = (
                f"Contact {name}.{rng.randint(1, 999)}@example.com or "
                f"+44 20 7946 {rng.randint(1000, 9999)}.\n"
            )
        else:
            part = (
                f"INFO 12:30:{rng.randint(10, 59)} request {rng.getrandbits(64):016x} took "
                f"{rng.randint(1, 999)} ms from 10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}\n"
            )
        parts.append(part)
        total += len(part)
    return "".join(parts)[:size]


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def run(repeat: int) -> dict[str, dict[str, float]]:
    texts = {
        "prose": mixed_text(),
        "numeric": mixed_text(numbers=0.5, seed=8),
        "clean": mixed_text(pii=False, seed=9),
    }
    rows: dict[str, dict[str, float]] = {}
    for name, text in texts.items():
        detectors = DetectorSet()
        old = median_ms(lambda: detectors.reference_plain(text), repeat)  # noqa: B023
        new = median_ms(lambda: detectors.plain(text), repeat)  # noqa: B023
        rows[f"detect {name}"] = {"old_ms": old, "new_ms": new, "ratio": new / old}

    text = texts["prose"]
    settings = PrivacySettings()

    def tokenize(fast: bool) -> Callable[[], Any]:
        def once() -> Any:
            tokenizer = settings.tokenizer()
            if not fast:
                tokenizer.detectors.use_fast_path(False)
            return tokenizer.tokenize(text, Vault(), server="docs", tool="read")

        return once

    old = median_ms(tokenize(False), repeat)
    new = median_ms(tokenize(True), repeat)
    rows["tokenize prose"] = {"old_ms": old, "new_ms": new, "ratio": new / old}

    tokenizer = settings.tokenizer()
    vault = Vault()
    tokenizer.tokenize(text, vault, server="docs", tool="read")
    again = median_ms(lambda: tokenizer.tokenize(text, vault, server="docs", tool="read"), repeat)
    rows["rescan prose (cached)"] = {"old_ms": old, "new_ms": again, "ratio": again / old}
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = run(args.repeat)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'1 MiB':24} {'old ms':>9} {'new ms':>9} {'new/old':>8}")
    for name, row in rows.items():
        print(f"{name:24} {row['old_ms']:9.1f} {row['new_ms']:9.1f} {row['ratio']:8.3f}")


if __name__ == "__main__":
    main()

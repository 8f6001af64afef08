"""The PII scan of 1 MB of text: the fast path against the whole-text scan, in one process.

    .venv/bin/python benchmarks/privacy.py [--repeat N] [--json]

Texts (1 MiB each, generated with a fixed seed):
  prose    sentences, JSON order records, contact lines with e-mail and phone, log lines with
           times, hex ids and IPv4 addresses (a mixed tool result or document)
  numeric  the same shapes with numbers in almost every sentence (a worst case: dates, ids
           and digit runs everywhere)
  clean    prose without any value to find
  contacts dense PII: a contact export, a name, an address in angle brackets, a phone number
           and a date on every line

  orders   the order prose of benchmarks/peers.py's 1 MB echo (a contact line every 2.4 KB)

Rows: detect (the detectors with markup, as a tool result is scanned: the old whole-text scan,
the fast path with pure-Python anchors, the fast path with native anchors when Hyperscan is
installed (the `fast` extra); ratios against the old scan), tokenize (a 1 MiB string through
the tokenizer, as a tool result: old and new), rescan (the same text again: the second scan is
answered from the content-hash cache), echo (the orders text, new each call, through a
session's wrappers around a tool that returns its argument, as in benchmarks/peers.py's P6: the
flow check of the argument, the call, the oracle guard and the result, which is the code's own
text and comes back unread; the vault already holds the text's contacts), stamp (the same, but
the tool puts a line before the text, as in P6b: only the tool's line and the edges of the
code's text are read), upper (the same, but the tool upper-cases the text: the result is the
tool's text, read whole and tokenized), save (the orders text sent back to the server its
contacts came from, answered with its size: old, the vault also holds a value of another
server, so the flow check reads the argument; new, every origin may go there unasked and
nothing reads it), records (5,000 contact records, about 900 KiB as JSON,
returned by a tool through the same wrappers: the first read in a session, which puts every
contact in the vault, the same records read again, and new contacts read for the tenth time
in one session: nine reads of others put 90,000 values in the vault), notes (2,000 records
whose note names another contact's address, ``wrote to user5@example5.com about the order``:
the tenth read of new ones in a session; old, the recall judges every address of the vault
that ends as the note's does; new, it skips the runs inside what the detectors found,
``codemode.privacy.shadows``). Medians of ``--repeat`` runs; ms per MiB, wall time and
this thread's CPU time (on a loaded machine the CPU time is the steadier one).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from codemode.config import CodemodeConfig
from codemode.engine.chain import build_invoker_chain
from codemode.privacy import PrivacySettings, Vault
from codemode.privacy.detectors import DetectorSet
from codemode.privacy.fastscan import native_available
from codemode.privacy.shadows import Shadows
from codemode.tools import ToolCall

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


ORDERS = (
    "Order 4417 shipped to Berlin on 2024-05-02; invoice INV-0142 is due in 30 days, total "
    "1,240.50 EUR. " * 24 + "Questions to ops@example.com or +49 30 1234567.\n"
) * 420


def median_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(wall, CPU) medians in ms."""
    walls, cpus = [], []
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.thread_time()
        fn()
        walls.append(time.perf_counter() - started)
        cpus.append(time.thread_time() - cpu)
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000


def contact_lines(size: int = SIZE) -> str:
    """Dense PII: a contact list as a mail client or CRM exports it, every line a name, an
    address in angle brackets, a phone number and a date (about 27,000 values a MiB)."""
    rows = contact_records(size // 60 + 1)
    lines = (
        f"{row['name']} <{row['email']}>, {row['phone']}, {row['city']}, "
        f"{row['orders']} orders, last on 2024-05-{row['orders'] % 28 + 1:02d}\n"
        for row in rows
    )
    return "".join(lines)[:size]


def texts_of(size: int = SIZE) -> dict[str, str]:
    """The texts the detect rows time (``tests/privacy/test_fastscan_texts.py`` checks the fast
    path finds exactly what the whole-text scan finds in each)."""
    return {
        "prose": mixed_text(size),
        "numeric": mixed_text(size, numbers=0.5, seed=8),
        "clean": mixed_text(size, pii=False, seed=9),
        "orders": ORDERS[:size],
        "contacts": contact_lines(size),
    }


def run(repeat: int, size: int = SIZE) -> dict[str, dict[str, float]]:
    texts = texts_of(size)
    rows: dict[str, dict[str, float]] = {}
    for name, text in texts.items():
        old_set, pure_set, native_set = DetectorSet(), DetectorSet(), DetectorSet()
        old_set.use_fast_path(False)
        pure_set.use_native_anchors(False)
        row: dict[str, float] = {}
        for label, detectors in (("old", old_set), ("pure", pure_set), ("native", native_set)):
            if label == "native" and not native_available():
                continue
            wall, cpu = median_ms(lambda d=detectors, t=text: d._detect(t), repeat)  # type: ignore[misc]
            row[f"{label}_ms"], row[f"{label}_cpu_ms"] = wall, cpu
        row["pure/old"] = row["pure_ms"] / row["old_ms"]
        if "native_ms" in row:
            row["native/old"] = row["native_ms"] / row["old_ms"]
        rows[f"detect {name}"] = row

    text = texts["prose"]
    settings = PrivacySettings()

    def tokenize(fast: bool) -> Callable[[], Any]:
        def once() -> Any:
            tokenizer = settings.tokenizer()
            if not fast:
                tokenizer.detectors.use_fast_path(False)
            return tokenizer.tokenize(text, Vault(), server="docs", tool="read")

        return once

    old, old_cpu = median_ms(tokenize(False), repeat)
    new, new_cpu = median_ms(tokenize(True), repeat)
    rows["tokenize prose"] = {"old_ms": old, "new_ms": new, "new/old": new / old}
    rows["tokenize prose"] |= {"old_cpu_ms": old_cpu, "new_cpu_ms": new_cpu}

    tokenizer = settings.tokenizer()
    vault = Vault()
    tokenizer.tokenize(text, vault, server="docs", tool="read")
    again, _again_cpu = median_ms(
        lambda: tokenizer.tokenize(text, vault, server="docs", tool="read"), repeat
    )
    rows["rescan prose (cached)"] = {"old_ms": old, "new_ms": again, "new/old": again / old}
    rows["echo orders (wrappers)"] = echo_row(texts["orders"], repeat)
    rows["stamp orders (wrappers)"] = echo_row(texts["orders"], repeat, tool="stamp")
    rows["upper orders (wrappers)"] = echo_row(texts["orders"], repeat, tool="upper")
    rows["save orders (wrappers)"] = save_row(texts["orders"], repeat)
    rows |= records_rows(5000 if size == SIZE else 50, repeat)
    rows["notes, 10th read of new ones"] = notes_row(2000 if size == SIZE else 50, repeat)
    return rows


def contact_records(count: int, start: int = 0) -> list[dict[str, Any]]:
    """``count`` contacts, numbered from ``start`` (other numbers: other contacts)."""
    rng = random.Random(4 + start)
    first = ["Maria", "Kofi", "Aiko", "Lars", "Priya", "Tom", "Ana", "Ivan"]
    last = ["Lopez", "Okafor", "Tanaka", "Berg", "Shah", "Reed", "Silva", "Petrov"]
    return [
        {
            "id": f"c{number}",
            "name": f"{rng.choice(first)} {rng.choice(last)}",
            "email": f"user{number}@example{number % 50}.com",
            "phone": f"+49 30 {rng.randint(1_000_000, 9_999_999)}",
            "city": rng.choice(["Berlin", "Paris", "Oslo"]),
            "orders": rng.randint(0, 50),
            "note": "Prefers e-mail; ordered 3 items on 2024-05-02.",
        }
        for number in range(start, start + count)
    ]


class _Records:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        return self.rows


def records_rows(count: int, repeat: int) -> dict[str, dict[str, float]]:
    records = _Records(contact_records(count))
    call = ToolCall("crm", "list_contacts", {})

    def chain() -> Any:
        return build_invoker_chain(
            CodemodeConfig(), records, session="bench", specs=lambda _s, _t: None, approver=None
        ).invoker

    def first_read() -> Any:
        return chain().invoke(call, timeout_s=60)  # a new session: every contact is new

    first, first_cpu = median_ms(first_read, repeat)
    invoker = chain()
    invoker.invoke(call, timeout_s=60)
    again, again_cpu = median_ms(lambda: invoker.invoke(call, timeout_s=60), repeat)
    # New contacts each read, in one session: the vault grows by two values a contact.
    batches = iter([contact_records(count, n * count) for n in range(1, 10 + repeat)])
    growing = _Records([])
    invoker = build_invoker_chain(
        CodemodeConfig(), growing, session="bench", specs=lambda _s, _t: None, approver=None
    ).invoker

    def new_read() -> Any:
        growing.rows = next(batches)
        return invoker.invoke(call, timeout_s=60)

    for _ in range(9):
        new_read()
    tenth, tenth_cpu = median_ms(new_read, repeat)
    return {
        "records, first read": {"new_ms": first, "new_cpu_ms": first_cpu},
        "records, read again": {"new_ms": again, "new_cpu_ms": again_cpu},
        "records, 10th read of new ones": {"new_ms": tenth, "new_cpu_ms": tenth_cpu},
    }


def noted_records(count: int, start: int) -> list[dict[str, Any]]:
    """``contact_records`` whose note names the next contact's address, as a CRM's notes do."""
    rows = contact_records(count, start)
    for row in rows:
        number = int(row["id"][1:]) + 1
        row["note"] = f"Wrote to user{number}@example{number % 50}.com about the order."
    return rows


def notes_row(count: int, repeat: int) -> dict[str, float]:
    """The tenth read of new noted records in one session, the recall skipping the runs inside
    what the detectors found (new) and judging every one (old: ``Shadows`` never made)."""
    found: dict[str, tuple[float, float]] = {}
    for label in ("old", "new"):
        batches = iter([noted_records(count, n * count * 2) for n in range(1, 10 + repeat)])
        growing = _Records([])
        invoker = build_invoker_chain(
            CodemodeConfig(), growing, session="bench", specs=lambda _s, _t: None, approver=None
        ).invoker

        def new_read(
            invoker: Any = invoker, growing: _Records = growing, batches: Any = batches
        ) -> Any:
            growing.rows = next(batches)
            return invoker.invoke(ToolCall("crm", "list_contacts", {}), timeout_s=60)

        made = vars(Shadows)["of"]  # the classmethod itself, put back as it was
        if label == "old":
            setattr(Shadows, "of", classmethod(lambda *_args: None))  # noqa: B010
        try:
            for _ in range(9):
                new_read()
            found[label] = median_ms(new_read, repeat)
        finally:
            setattr(Shadows, "of", made)  # noqa: B010
    (old, old_cpu), (new, new_cpu) = found["old"], found["new"]
    return {"old_ms": old, "new_ms": new, "new/old": new / old, "old_cpu_ms": old_cpu} | {
        "new_cpu_ms": new_cpu
    }


class _Echo:
    """A tool that returns its argument (the upstream of P6); ``stamp`` puts a line before it
    (P6b), ``upper`` upper-cases it, ``save`` answers its size."""

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        if call.tool == "stamp":
            return f"stamped\n{call.arguments['text']}"
        if call.tool == "upper":
            return str(call.arguments["text"]).upper()
        if call.tool == "save":
            return {"saved": len(call.arguments["text"])}
        if call.tool == "contact":
            return {"email": "grace.hopper@navy.example.com"}
        return call.arguments["text"]


def _saving(invoker: Any, text: str) -> Callable[[], Any]:
    calls = iter(range(1_000_000))

    def once() -> Any:
        argument = f"call {next(calls)}: {text}"  # a new text each call
        return invoker.invoke(ToolCall("up", "save", {"text": argument}), timeout_s=60)

    return once


def save_row(text: str, repeat: int) -> dict[str, float]:
    """1 MiB sent to a tool of the server its contacts came from (a document saved back where
    it was read), answered with its size. ``old``: the vault also holds a value from another
    server, whose data would be asked for there, so the flow check reads the argument for
    values in clear; ``new``: every origin may go there unasked, and nothing reads it."""
    found: dict[str, tuple[float, float]] = {}
    for label, origins in (("old", ("up", "crm")), ("new", ("up",))):
        chain = build_invoker_chain(
            CodemodeConfig(), _Echo(), session="bench", specs=lambda _s, _t: None, approver=None
        )
        for origin in origins:  # the vault learns the contacts, from each origin
            chain.invoker.invoke(ToolCall(origin, "contact", {}), timeout_s=60)
        chain.invoker.invoke(ToolCall("up", "echo", {"text": text[:4096]}), timeout_s=60)
        found[label] = median_ms(_saving(chain.invoker, text), max(repeat, 5))
    (old, old_cpu), (new, new_cpu) = found["old"], found["new"]
    return {"old_ms": old, "new_ms": new, "new/old": new / old, "old_cpu_ms": old_cpu} | {
        "new_cpu_ms": new_cpu
    }


def echo_row(text: str, repeat: int, *, tool: str = "echo") -> dict[str, float]:
    chain = build_invoker_chain(
        CodemodeConfig(), _Echo(), session="bench", specs=lambda _s, _t: None, approver=None
    )
    calls = iter(range(1_000_000))

    def once() -> Any:
        argument = f"call {next(calls)}: {text}"  # a new text each call: nothing cached answers
        return chain.invoker.invoke(ToolCall("up", tool, {"text": argument}), timeout_s=60)

    once()  # the vault learns the contacts, as after a first result
    wall, cpu = median_ms(once, max(repeat, 5))
    return {"new_ms": wall, "new_cpu_ms": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--smoke", action="store_true", help="16 KiB texts, once: does it still run"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = run(1, 16 << 10) if args.smoke else run(args.repeat)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'1 MiB':22} {'old ms':>8} {'pure ms':>8} {'native ms':>10} {'native/old':>10}"
          f"   CPU ms old / pure / native")  # fmt: skip
    for name, row in rows.items():
        if name.startswith("detect"):
            print(
                f"{name:22} {row['old_ms']:8.1f} {row['pure_ms']:8.1f} "
                f"{row.get('native_ms', float('nan')):10.1f} {row.get('native/old', 0):10.3f}"
                f"   {row['old_cpu_ms']:.1f} / {row['pure_cpu_ms']:.1f} / "
                f"{row.get('native_cpu_ms', float('nan')):.1f}"
            )
        elif "old_ms" in row:
            print(
                f"{name:22} {row['old_ms']:8.1f} {'':8} {row['new_ms']:10.1f} {row['new/old']:10.3f}"
            )
        else:
            print(f"{name:22} {'':8} {'':8} {row['new_ms']:10.1f}   CPU {row['new_cpu_ms']:.1f}")


if __name__ == "__main__":
    main()

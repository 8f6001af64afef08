"""Small file chores in the workspace (clean, filter, count, sort, find), for codemode with
Python and for the tool-calling baseline through server-filesystem."""

from __future__ import annotations

import csv
import io
import json
import random
from collections import Counter
from typing import Any

from bench_refs import Results, answer, call, calls, execute, then
from bench_task import Task, expect, first_problem
from bench_world import World

FS = "filesystem__"

# --- small file chores --------------------------------------------------------------------------


def _write_contacts(world: World) -> None:
    rng = random.Random(3)
    people = [(f"Person {i}", f"person{i}@example.org", f"Company {i % 17}") for i in range(100)]
    rows = list(people)
    for name, email, company in rng.sample(people, 20):
        rows.append((name, f" {email.upper()} ", company))
    rng.shuffle(rows)
    lines = ["name,email,company", *(f"{n},{e},{c}" for n, e, c in rows)]
    (world.workspace / "contacts_raw.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _dedupe(text: str) -> str:
    seen: dict[str, dict[str, str]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        email = row["email"].strip().lower()
        seen.setdefault(email, {**row, "email": email})
    lines = ["name,email,company"]
    lines += [f"{r['name']},{r['email']},{r['company']}" for _, r in sorted(seen.items())]
    return "\n".join(lines) + "\n"


def _check_dedupe(world: World) -> str | None:
    clean = world.file("contacts_clean.csv")
    if clean is None:
        return "contacts_clean.csv is missing"
    emails = [r["email"] for r in csv.DictReader(io.StringIO(clean))]
    wanted = [f"person{i}@example.org" for i in range(100)]
    return expect(
        emails == sorted(wanted), "contacts_clean.csv is not the 100 unique emails, sorted"
    )


DEDUPE = Task(
    id="dedupe_contacts",
    prompt="contacts_raw.csv in the workspace ({workspace}) has duplicate people (the same email "
    "with other case or spaces). Write contacts_clean.csv with one row per email (lowercased, "
    "trimmed; keep the first row of each), sorted by email, same columns.",
    setup=_write_contacts,
    check=_check_dedupe,
    codemode=lambda w: [
        execute(
            "import csv\n\ndef clean(path):\n    seen = {}\n    with open(path) as f:\n"
            "        for row in csv.DictReader(f):\n            email = row['email'].strip().lower()\n"
            "            seen.setdefault(email, {**row, 'email': email})\n"
            "    return [seen[e] for e in sorted(seen)]\n\n"
            "rows = clean('contacts_raw.csv')\n"
            "with open('contacts_clean.csv', 'w', newline='') as f:\n"
            "    w = csv.DictWriter(f, fieldnames=['name', 'email', 'company'], lineterminator='\\n')\n"
            "    w.writeheader(); w.writerows(rows)\nprint(len(rows), 'unique contacts')",
            "Plan: normalise emails, keep the first row of each, sort, write.",
        ),
        answer("contacts_clean.csv has 100 unique contacts."),
    ],
    baseline=lambda w: [
        call(FS + "read_text_file", path=str(w.workspace / "contacts_raw.csv")),
        then(
            lambda r: call(
                FS + "write_file",
                path=str(w.workspace / "contacts_clean.csv"),
                content=_dedupe(r.text()),
            )
        ),
        answer("contacts_clean.csv has 100 unique contacts."),
    ],
)


def _write_inventory(world: World) -> None:
    rng = random.Random(5)
    items = [
        {
            "sku": f"SKU-{i:03d}",
            "name": f"Part {i}",
            "on_hand": rng.randint(0, 120),
            "reorder_level": rng.choice([10, 20, 30, 50]),
        }
        for i in range(80)
    ]
    (world.workspace / "inventory.json").write_text(json.dumps(items, indent=1), encoding="utf-8")


def _low_stock(items: list[dict[str, Any]]) -> str:
    low = sorted((i for i in items if i["on_hand"] < i["reorder_level"]), key=lambda i: i["sku"])
    lines = ["sku,name,on_hand,reorder_level"]
    lines += [f"{i['sku']},{i['name']},{i['on_hand']},{i['reorder_level']}" for i in low]
    return "\n".join(lines) + "\n"


def _check_low_stock(world: World) -> str | None:
    got = world.file("low_stock.csv")
    items = json.loads((world.workspace / "inventory.json").read_text(encoding="utf-8"))
    if got is None:
        return "low_stock.csv is missing"
    rows = [r["sku"] for r in csv.DictReader(io.StringIO(got))]
    wanted = [r["sku"] for r in csv.DictReader(io.StringIO(_low_stock(items)))]
    return expect(rows == wanted, f"low_stock.csv has {len(rows)} skus, expected {len(wanted)}")


LOW_STOCK = Task(
    id="low_stock",
    prompt="inventory.json in the workspace ({workspace}) lists parts. Write low_stock.csv "
    "(sku,name,on_hand,reorder_level) with every part whose on_hand is below its "
    "reorder_level, sorted by sku.",
    setup=_write_inventory,
    check=_check_low_stock,
    codemode=lambda w: [
        execute(
            "import csv, json\n\ndef low(items):\n"
            "    return sorted((i for i in items if i['on_hand'] < i['reorder_level']), key=lambda i: i['sku'])\n\n"
            "rows = low(json.load(open('inventory.json')))\n"
            "with open('low_stock.csv', 'w', newline='') as f:\n"
            "    w = csv.DictWriter(f, fieldnames=['sku', 'name', 'on_hand', 'reorder_level'], lineterminator='\\n')\n"
            "    w.writeheader(); w.writerows(rows)\nprint(len(rows), 'parts to reorder')",
            "Plan: filter on_hand < reorder_level, sort by sku, write CSV.",
        ),
        answer("low_stock.csv lists the parts below their reorder level."),
    ],
    baseline=lambda w: [
        call(FS + "read_text_file", path=str(w.workspace / "inventory.json")),
        then(
            lambda r: call(
                FS + "write_file",
                path=str(w.workspace / "low_stock.csv"),
                content=_low_stock(json.loads(r.text())),
            )
        ),
        answer("low_stock.csv lists the parts below their reorder level."),
    ],
)


def _write_log(world: World) -> None:
    rng = random.Random(9)
    lines = []
    for i in range(1500):
        level = rng.choices(["INFO", "WARN", "ERROR"], [80, 12, 8])[0]
        code = rng.choice(["E100", "E200", "E301", "E404", "E500"]) if level == "ERROR" else "-"
        lines.append(f"2026-09-{1 + i % 28:02d}T10:{i % 60:02d}:00 {level} {code} request {i}")
    (world.workspace / "app.log").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _error_counts(text: str) -> dict[str, int]:
    return dict(Counter(line.split()[2] for line in text.splitlines() if " ERROR " in line))


def _check_log(world: World) -> str | None:
    got = world.file("error_summary.json")
    wanted = _error_counts((world.workspace / "app.log").read_text(encoding="utf-8"))
    if got is None:
        return "error_summary.json is missing"
    try:
        data = json.loads(got)
    except ValueError:
        return "error_summary.json is not JSON"
    return expect(data == wanted, f"error counts {data} != {wanted}")


LOG = Task(
    id="log_error_summary",
    prompt="Count the ERROR lines of app.log in the workspace ({workspace}) per error code (the "
    "word after ERROR) and save the counts as a JSON object in error_summary.json.",
    setup=_write_log,
    check=_check_log,
    codemode=lambda w: [
        execute(
            "import json\nfrom collections import Counter\n\ndef count(path):\n"
            "    return Counter(line.split()[2] for line in open(path) if ' ERROR ' in line)\n\n"
            "counts = count('app.log')\njson.dump(counts, open('error_summary.json', 'w'))\nprint(counts)",
            "Plan: count codes on ERROR lines, dump JSON.",
        ),
        answer("error_summary.json has the counts per error code."),
    ],
    baseline=lambda w: [
        call(FS + "read_text_file", path=str(w.workspace / "app.log")),
        then(
            lambda r: call(
                FS + "write_file",
                path=str(w.workspace / "error_summary.json"),
                content=json.dumps(_error_counts(r.text())),
            )
        ),
        answer("error_summary.json has the counts per error code."),
    ],
)

# --- organising files, finding a line -------------------------------------------------------------

_INBOX = [f"file_{i:02d}.{ext}" for i, ext in enumerate(["pdf", "csv", "png", "txt"] * 4)][:15]


def _write_inbox(world: World) -> None:
    inbox = world.workspace / "inbox"
    inbox.mkdir(exist_ok=True)
    for name in _INBOX:
        (inbox / name).write_text(f"content of {name}\n", encoding="utf-8")


def _check_inbox(world: World) -> str | None:
    inbox = world.workspace / "inbox"
    misplaced = [n for n in _INBOX if not (inbox / n.rsplit(".", 1)[1] / n).is_file()]
    left = [p.name for p in inbox.iterdir() if p.is_file()]
    return first_problem(
        expect(not misplaced, f"not in their folder: {misplaced[:5]}"),
        expect(not left, f"still loose in inbox/: {left[:5]}"),
    )


ORGANISE = Task(
    id="organise_inbox",
    prompt="Sort the files in inbox/ in the workspace ({workspace}) into subfolders of inbox/ "
    "named after their extension (inbox/pdf/, inbox/csv/, ...).",
    setup=_write_inbox,
    check=_check_inbox,
    codemode=lambda w: [
        execute(
            "from pathlib import Path\n\ndef organise(folder):\n    moved = 0\n"
            "    for path in sorted(Path(folder).iterdir()):\n        if path.is_file():\n"
            "            target = path.parent / path.suffix.lstrip('.')\n"
            "            target.mkdir(exist_ok=True)\n            path.rename(target / path.name)\n"
            "            moved += 1\n    return moved\n\nprint(organise('inbox'), 'files moved')",
            "Plan: one folder per extension, move each file.",
        ),
        answer("The 15 files are in inbox/<extension>/."),
    ],
    baseline=lambda w: [
        call(FS + "list_directory", path=str(w.workspace / "inbox")),
        calls(
            [
                (FS + "create_directory", {"path": str(w.workspace / "inbox" / ext)})
                for ext in ("pdf", "csv", "png", "txt")
            ]
        ),
        calls(
            [
                (
                    FS + "move_file",
                    {
                        "source": str(w.workspace / "inbox" / n),
                        "destination": str(w.workspace / "inbox" / n.rsplit(".", 1)[1] / n),
                    },
                )
                for n in _INBOX
            ]
        ),
        answer("The 15 files are in inbox/<extension>/."),
    ],
)


def _write_logs_tree(world: World) -> None:
    rng = random.Random(13)
    root = world.workspace / "logs_tree"
    for i in range(30):
        folder = root / f"service_{i % 5}" / f"day_{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = [f"INFO tick {rng.randint(1, 9999)}" for _ in range(40)]
        if i == 22:
            lines.insert(17, "ERROR 4711 disk quota exceeded")
        (folder / f"run_{i:02d}.log").write_text("\n".join(lines) + "\n", encoding="utf-8")


_ERROR_FILE = "logs_tree/service_2/day_1/run_22.log"


def _check_error_file(world: World) -> str | None:
    got = world.file("answer.txt")
    return expect(got is not None and _ERROR_FILE in got, f"answer.txt does not name {_ERROR_FILE}")


FIND_ERROR = Task(
    id="find_error_file",
    prompt="One log file under logs_tree/ in the workspace ({workspace}) contains 'ERROR 4711'. "
    "Write its path, relative to the workspace, to answer.txt.",
    setup=_write_logs_tree,
    check=_check_error_file,
    codemode=lambda w: [
        execute(
            "from pathlib import Path\n\ndef find(root, needle):\n"
            "    return [str(p) for p in sorted(Path(root).rglob('*.log')) if needle in p.read_text()]\n\n"
            "hits = find('logs_tree', 'ERROR 4711')\nopen('answer.txt', 'w').write(hits[0] + '\\n')\nprint(hits)",
            "Plan: scan every log for the string.",
        ),
        answer(f"{_ERROR_FILE} (written to answer.txt)."),
    ],
    baseline=lambda w: [
        call(FS + "directory_tree", path=str(w.workspace / "logs_tree")),
        calls(
            [
                (
                    FS + "read_multiple_files",
                    {
                        "paths": [
                            str(
                                w.workspace
                                / "logs_tree"
                                / f"service_{i % 5}"
                                / f"day_{i % 3}"
                                / f"run_{i:02d}.log"
                            )
                            for i in range(30)
                        ]
                    },
                )
            ]
        ),
        call(FS + "write_file", path=str(w.workspace / "answer.txt"), content=_ERROR_FILE + "\n"),
        answer(f"{_ERROR_FILE} (written to answer.txt)."),
    ],
)


TASKS = [DEDUPE, LOW_STOCK, LOG, ORGANISE, FIND_ERROR]
__all__ = ["TASKS", "Results"]

"""Tasks over files in the workspace. codemode works on them with Python; the tool-calling
baseline reads and writes them through the real server-filesystem MCP server."""

from __future__ import annotations

import csv
import io
import itertools
import json
import random
from collections import Counter, defaultdict
from typing import Any

from bench_refs import Results, answer, call, calls, execute, then
from bench_task import Task, expect, first_problem
from bench_world import World

FS = "filesystem__"

# --- sales.csv -> monthly totals -> highest growth -> result.md (the seeds' case) ----------------

_MONTH_FACTORS = [1.0, 0.9, 1.05, 1.1, 0.95, 1.0, 1.6, 1.1, 1.0, 1.05, 0.9, 1.2]


def _write_sales(world: World) -> None:
    rng = random.Random(7)
    rows = []
    for month, factor in enumerate(_MONTH_FACTORS, start=1):
        for _ in range(30):
            day = rng.randint(1, 28)
            amount = int(rng.randint(200, 1800) * factor)
            region = rng.choice(["North", "South", "East", "West"])
            rows.append((f"2025-{month:02d}-{day:02d}", region, rng.choice("ABC"), amount))
    rows.sort()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["date", "region", "product", "amount"])
    writer.writerows(rows)
    (world.workspace / "sales.csv").write_text(out.getvalue(), encoding="utf-8")


def _monthly(text: str) -> dict[str, int]:
    totals: dict[str, int] = defaultdict(int)
    for row in csv.DictReader(io.StringIO(text)):
        totals[row["date"][:7]] += int(row["amount"])
    return dict(sorted(totals.items()))


def _best_growth(totals: dict[str, int]) -> tuple[str, float]:
    months = list(totals)
    growth = {m: (totals[m] - totals[p]) / totals[p] for p, m in itertools.pairwise(months)}
    best = max(growth, key=lambda m: growth[m])
    return best, growth[best]


def _sales_report(text: str) -> str:
    totals = _monthly(text)
    best, rate = _best_growth(totals)
    lines = ["# Monthly sales", "", "| month | total |", "|---|---:|"]
    lines += [f"| {m} | {t} |" for m, t in totals.items()]
    lines += ["", f"Highest month-over-month growth: {best} ({rate:+.1%})"]
    return "\n".join(lines) + "\n"


def _check_sales(world: World) -> str | None:
    report = world.file("result.md")
    sales = (world.workspace / "sales.csv").read_text(encoding="utf-8")
    if report is None:
        return "result.md is missing"
    totals = _monthly(sales)
    best, _ = _best_growth(totals)
    missing = [m for m, t in totals.items() if str(t) not in report and f"{t:,}" not in report]
    growth_lines = [line for line in report.splitlines() if "growth" in line.lower()]
    return first_problem(
        expect(not missing, f"result.md lacks the totals of {missing}"),
        expect(any(best in line for line in growth_lines), f"result.md does not name {best}"),
    )


SALES_CODE = """\
import csv
from collections import defaultdict

def monthly_totals(path):
    totals = defaultdict(int)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            totals[row["date"][:7]] += int(row["amount"])
    return dict(sorted(totals.items()))

def best_growth(totals):
    months = list(totals)
    growth = {m: (totals[m] - totals[p]) / totals[p] for p, m in zip(months, months[1:])}
    best = max(growth, key=growth.get)
    return best, growth[best]

def write_report(totals, best, rate):
    lines = ["# Monthly sales", "", "| month | total |", "|---|---:|"]
    lines += [f"| {m} | {t} |" for m, t in totals.items()]
    lines += ["", f"Highest month-over-month growth: {best} ({rate:+.1%})"]
    with open("result.md", "w") as f:
        f.write("\\n".join(lines) + "\\n")

totals = monthly_totals("sales.csv")
best, rate = best_growth(totals)
write_report(totals, best, rate)
print(len(totals), "months; best growth:", best, f"{rate:+.1%}")
"""

SALES = Task(
    id="sales_growth",
    prompt="Read sales.csv in the workspace ({workspace}), compute the total sales per month, "
    "find the month with the highest month-over-month growth, and save the monthly totals "
    "and that month to result.md.",
    setup=_write_sales,
    check=_check_sales,
    codemode=lambda w: [
        execute(
            SALES_CODE,
            "Plan: read the CSV, total per month, compare each month with the "
            "previous one, write a markdown table and the best month to result.md.",
        ),
        answer("result.md has the monthly totals; July 2025 grew the most."),
    ],
    baseline=lambda w: [
        call(FS + "read_text_file", "Read the CSV first.", path=str(w.workspace / "sales.csv")),
        then(
            lambda r: call(
                FS + "write_file",
                path=str(w.workspace / "result.md"),
                content=_sales_report(r.text()),
            )
        ),
        answer("result.md has the monthly totals and the month with the highest growth."),
    ],
    tags=("seed",),
)

# --- the weekly report: two charts and an anomaly table (the seeds' case) -----------------------

_REGIONS = ["North", "South", "East", "West", "Central"]
_DAYS = [f"2026-09-{d:02d}" for d in range(14, 21)]
_SPIKES = {("2026-09-16", "East"): 1.45, ("2026-09-18", "North"): 0.6, ("2026-09-19", "West"): 1.5}


def _write_orders(world: World) -> None:
    rng = random.Random(11)
    lines = ["day,region,amount"]
    for region in _REGIONS:
        base = rng.randint(4000, 9000)
        for day in _DAYS:
            value = base * (1 + rng.uniform(-0.04, 0.04)) * _SPIKES.get((day, region), 1.0)
            lines.append(f"{day},{region},{round(value)}")
    (world.workspace / "orders_week.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _anomalies(text: str) -> list[tuple[str, str, float]]:
    by_region: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for row in csv.DictReader(io.StringIO(text)):
        by_region[row["region"]].append((row["day"], int(row["amount"])))
    found = []
    for region, series in by_region.items():
        series.sort()
        for (_, before), (day, value) in itertools.pairwise(series):
            change = (value - before) / before
            if abs(change) > 0.15:
                found.append((day, region, change))
    return sorted(found)


def _svg_chart(title: str, values: list[float]) -> str:
    top = max(values) or 1
    points = " ".join(f"{20 + i * 60},{200 - 180 * v / top:.0f}" for i, v in enumerate(values))
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="420" height="220">'
        f'<title>{title}</title><polyline fill="none" stroke="black" points="{points}"/></svg>'
    )


def _weekly_files(text: str) -> dict[str, str]:
    rows = list(csv.DictReader(io.StringIO(text)))
    totals = [sum(int(r["amount"]) for r in rows if r["day"] == day) for day in _DAYS]
    east = [int(r["amount"]) for r in rows if r["region"] == "East"]
    table = ["| day | region | change |", "|---|---|---:|"]
    table += [f"| {d} | {r} | {c:+.0%} |" for d, r, c in _anomalies(text)]
    report = "\n".join(
        [
            "# Weekly report",
            "",
            "![Daily total](total.svg)",
            "![East trend](trend.svg)",
            "",
            "## Anomalies (day-over-day change above 15%)",
            "",
            *table,
            "",
        ]
    )
    return {
        "report.md": report,
        "total.svg": _svg_chart("Daily total", totals),
        "trend.svg": _svg_chart("East", east),
    }


def _check_weekly(world: World) -> str | None:
    report = world.file("report.md")
    if report is None:
        return "report.md is missing"
    import re

    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report)
    valid = []
    for name in images:
        path = world.workspace / name
        if path.is_file() and not path.is_symlink():
            head = path.read_bytes()[:400]
            if head.startswith(b"\x89PNG") or b"<svg" in head:
                valid.append(name)
    text = (world.workspace / "orders_week.csv").read_text(encoding="utf-8")
    expected = {(d, r) for d, r, _ in _anomalies(text)}
    table_rows = [line for line in report.splitlines() if line.startswith("|") and "2026-" in line]
    found = {(d, r) for d, r in expected if any(d in line and r in line for line in table_rows)}
    return first_problem(
        expect(len(valid) >= 2, f"report.md shows {len(valid)} valid chart images, not 2"),
        expect(found == expected, f"anomaly table misses {sorted(expected - found)}"),
        expect(
            len(table_rows) == len(expected), f"{len(table_rows)} anomaly rows, not {len(expected)}"
        ),
    )


WEEKLY_CODE = """\
import pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

def load(path):
    return pd.read_csv(path).pivot_table(index="day", columns="region", values="amount", aggfunc="sum")

def charts(pivot):
    pivot.plot(title="Orders per region").get_figure().savefig("trend.png")
    plt.close("all")
    pivot.sum(axis=1).plot(kind="bar", title="Daily total").get_figure().savefig("total.png")
    plt.close("all")

def anomalies(pivot):
    change = pivot.pct_change().stack()
    found = change[change.abs() > 0.15]
    return [(day, region, value) for (day, region), value in found.items()]

def write(rows):
    table = ["| day | region | change |", "|---|---|---:|"]
    table += [f"| {d} | {r} | {c:+.0%} |" for d, r, c in rows]
    lines = ["# Weekly report", "", "![Trend](trend.png)", "![Daily total](total.png)", "",
             "## Anomalies (day-over-day change above 15%)", "", *table]
    open("report.md", "w").write("\\n".join(lines) + "\\n")

pivot = load("orders_week.csv")
charts(pivot)
rows = anomalies(pivot)
write(rows)
print(len(rows), "anomalies:", rows)
"""

WEEKLY = Task(
    id="weekly_report",
    prompt="From orders_week.csv in the workspace ({workspace}), write report.md: a chart of "
    "the daily orders per region and a chart of the daily total (as image files shown in the "
    "report), and a table of anomalies: every day and region whose amount changed by more "
    "than 15% from the previous day.",
    setup=_write_orders,
    check=_check_weekly,
    codemode=lambda w: [
        execute(
            WEEKLY_CODE,
            "Plan: pivot days x regions, two matplotlib charts, "
            "pct_change for anomalies, then the markdown report.",
        ),
        answer("report.md has two charts and the anomaly table."),
    ],
    baseline=lambda w: [
        call(FS + "read_text_file", path=str(w.workspace / "orders_week.csv")),
        then(
            lambda r: calls(
                [
                    (FS + "write_file", {"path": str(w.workspace / name), "content": content})
                    for name, content in _weekly_files(r.text()).items()
                ],
                "Write the two charts as SVG and the report.",
            )
        ),
        answer("report.md has two charts and the anomaly table."),
    ],
    tags=("seed",),
)

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

# --- recovery: a package that is not installed ----------------------------------------------------


def _region_table(text: str) -> str:
    totals: dict[str, int] = defaultdict(int)
    for row in csv.DictReader(io.StringIO(text)):
        totals[row["region"]] += int(row["amount"])
    lines = [
        "| region | total |",
        "|---|---:|",
        *(f"| {r} | {t} |" for r, t in sorted(totals.items())),
    ]
    return "\n".join(lines) + "\n"


def _check_region_table(world: World) -> str | None:
    got = world.file("region_totals.md")
    if got is None:
        return "region_totals.md is missing"
    text = (world.workspace / "sales.csv").read_text(encoding="utf-8")
    missing = [
        line
        for line in _region_table(text).splitlines()[2:]
        if line.split("|")[2].strip() not in got
    ]
    return expect(not missing, f"region_totals.md lacks {missing}")


REGION_TABLE = Task(
    id="missing_package",
    setup=_write_sales,
    prompt="Using the tabulate package if it is available, write region_totals.md in the "
    "workspace ({workspace}): a markdown table of the total amount per region in sales.csv.",
    check=_check_region_table,
    codemode=lambda w: [
        execute(
            "import csv\nfrom collections import defaultdict\nfrom tabulate import tabulate\n\n"
            "totals = defaultdict(int)\nfor row in csv.DictReader(open('sales.csv')):\n"
            "    totals[row['region']] += int(row['amount'])\n"
            "open('region_totals.md', 'w').write(tabulate(sorted(totals.items()), ['region', 'total'], tablefmt='github'))",
            "Plan: total per region, format with tabulate.",
        ),
        execute(
            "def table(totals):\n    lines = ['| region | total |', '|---|---:|']\n"
            "    return '\\n'.join(lines + [f'| {r} | {t} |' for r, t in sorted(totals.items())]) + '\\n'\n\n"
            "totals = defaultdict(int)\nfor row in csv.DictReader(open('sales.csv')):\n"
            "    totals[row['region']] += int(row['amount'])\n"
            "open('region_totals.md', 'w').write(table(totals))\nprint(table(totals))",
            "tabulate is not installed: write the markdown table by hand.",
        ),
        answer("region_totals.md has the totals per region (tabulate was missing, so by hand)."),
    ],
    baseline=lambda w: [
        call(FS + "read_text_file", path=str(w.workspace / "sales.csv")),
        then(
            lambda r: call(
                FS + "write_file",
                path=str(w.workspace / "region_totals.md"),
                content=_region_table(r.text()),
            )
        ),
        answer("region_totals.md has the totals per region."),
    ],
    tags=("recovery",),
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

TASKS = [SALES, WEEKLY, DEDUPE, LOW_STOCK, LOG, REGION_TABLE, ORGANISE, FIND_ERROR]
__all__ = ["TASKS", "Results"]

"""Tasks over files in the workspace: the seeds' sales.csv and weekly report, and a task
that needs recovery from a missing package. codemode works on them with Python; the
tool-calling baseline reads and writes them through the real server-filesystem MCP server."""

from __future__ import annotations

import csv
import io
import itertools
import random
from collections import defaultdict

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


TASKS = [SALES, WEEKLY, REGION_TABLE]
__all__ = ["TASKS", "Results"]

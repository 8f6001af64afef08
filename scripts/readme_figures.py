"""The README's demo figures against a fresh run of `codemode demo`.

    python scripts/readme_figures.py           # check: exit 1 and list what differs
    python scripts/readme_figures.py --write   # rewrite the README's figures from this run

The figures: the `make demo` excerpt at the top (characters copied, both totals, the saving)
and the first three rows of the "Why" table (both totals and the saving per task). The tool
calling totals are exact; codemode's totals count execute results that carry timings and
random session and approval ids, so they move by a few tokens from run to run: they and the
savings are compared within that jitter.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# README table rows (by their first cell) and the demo task each reports.
ROWS = {
    "seed scenario:": "Task 1",
    "filter 300 CRM leads": "Task 2",
    "copy 20 contacts": "Task 3",
}
TOKEN_JITTER = 0.02  # codemode totals: timings and random ids in results, run to run
SAVING_JITTER = 0.15  # percentage points
_TOP = re.compile(
    r"copied (?P<chars>[\d,]+) characters into Acme Corp's notes: True\n"
    r"tool calling \(every definition and result in context\) +(?P<baseline>[\d,]+) tokens\n"
    r"codemode \(search \+ execute; data stays in the sandbox\) +(?P<codemode>[\d,]+) tokens\n"
    r"codemode used (?P<saving>[\d.]+)% fewer tokens"
)
_ROW = re.compile(
    r"^\| (?P<label>[^|]+?) \| (?P<baseline>[\d,]+) tokens \| (?P<codemode>[\d,]+) tokens "
    r"\(-(?P<saving>[\d.]+)%\) \|$",
    re.M,
)


@dataclass(frozen=True)
class Figures:
    baseline: int
    codemode: int
    saving: float  # percent
    chars: int | None = None


def run_demo() -> list[dict[str, Any]]:
    """`codemode demo --json` in a fresh state directory: its ledgers."""
    with tempfile.TemporaryDirectory(prefix="readme-figures-") as home:
        env = {**os.environ, "CODEMODE_STATE_DIR": str(Path(home) / "state")}
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")])
        )
        done = subprocess.run(
            [sys.executable, "-m", "codemode", "demo", "--json"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=home,
            env=env,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"codemode demo failed:\n{done.stderr[-3000:]}")
    start = done.stdout.index("[") if not done.stdout.startswith("[") else 0
    ledgers: list[dict[str, Any]] = json.loads(done.stdout[start:])
    return ledgers


def demo_figures(ledgers: list[dict[str, Any]]) -> dict[str, Figures]:
    found: dict[str, Figures] = {}
    for ledger in ledgers:
        task = str(ledger["title"]).split(":")[0]
        baseline = sum(int(line["tokens"]) for line in ledger["tool_calling"])
        codemode = sum(int(line["tokens"]) for line in ledger["codemode"])
        copied = re.search(r"copied ([\d,]+) characters", str(ledger.get("output", "")))
        chars = int(copied.group(1).replace(",", "")) if copied else None
        found[task] = Figures(baseline, codemode, round(100 * ledger["saving"], 1), chars)
    return found


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def readme_figures(text: str) -> dict[str, Figures]:
    """The figures the README shows: "top" (the excerpt) and one per table row's task."""
    found: dict[str, Figures] = {}
    top = _TOP.search(text)
    if top is not None:
        found["top"] = Figures(
            _number(top["baseline"]),
            _number(top["codemode"]),
            float(top["saving"]),
            _number(top["chars"]),
        )
    for row in _ROW.finditer(text):
        for label, task in ROWS.items():
            if row["label"].startswith(label):
                found[task] = Figures(
                    _number(row["baseline"]), _number(row["codemode"]), float(row["saving"])
                )
    return found


def problems(text: str, run: dict[str, Figures]) -> list[str]:
    """What the README shows that this run does not (empty: the README is right)."""
    shown = readme_figures(text)
    wanted = {"top": "Task 1", **{task: task for task in ROWS.values()}}
    found: list[str] = []
    for where, task in wanted.items():
        if where not in shown:
            found.append(f"README: no figures found for {where}")
            continue
        if task not in run:
            found.append(f"the demo printed no {task}")
            continue
        old, new = shown[where], run[task]
        if old.baseline != new.baseline:
            found.append(
                f"{where}: tool calling {old.baseline:,} tokens, the demo {new.baseline:,}"
            )
        if abs(old.codemode - new.codemode) > TOKEN_JITTER * new.codemode:
            found.append(f"{where}: codemode {old.codemode:,} tokens, the demo {new.codemode:,}")
        if abs(old.saving - new.saving) > SAVING_JITTER:
            found.append(f"{where}: {old.saving:.1f}% fewer tokens, the demo {new.saving:.1f}%")
        if old.chars is not None and old.chars != new.chars:
            found.append(f"{where}: {old.chars:,} characters copied, the demo {new.chars}")
    return found


def rewrite(text: str, run: dict[str, Figures]) -> str:
    """The README with its demo figures from ``run``."""
    first = run["Task 1"]

    def top(match: re.Match[str]) -> str:
        block = match.group(0)
        block = block.replace(match["chars"], f"{first.chars:,}", 1)
        block = re.sub(
            r"(in context\) +)[\d,]+( tokens)",
            lambda m: _aligned(m, first.baseline),
            block,
        )
        block = re.sub(
            r"(in the sandbox\) +)[\d,]+( tokens)",
            lambda m: _aligned(m, first.codemode),
            block,
        )
        return block.replace(f"used {match['saving']}%", f"used {first.saving:.1f}%")

    def row(match: re.Match[str]) -> str:
        task = next((t for label, t in ROWS.items() if match["label"].startswith(label)), None)
        if task is None:
            return match.group(0)
        new = run[task]
        return (
            f"| {match['label']} | {new.baseline:,} tokens | {new.codemode:,} tokens "
            f"(-{new.saving:.1f}%) |"
        )

    return _ROW.sub(row, _TOP.sub(top, text, count=1))


def _aligned(match: re.Match[str], value: int) -> str:
    """``value`` in place of the number, keeping the column's right edge."""
    width = len(match.group(0)) - len(match.group(1)) - len(match.group(2))
    head = match.group(1).rstrip(" ")
    pad = len(match.group(1)) - len(head) + width - len(f"{value:,}")
    return f"{head}{' ' * max(pad, 1)}{value:,}{match.group(2)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the README's figures")
    args = parser.parse_args()
    run = demo_figures(run_demo())
    text = README.read_text(encoding="utf-8")
    if args.write:
        README.write_text(rewrite(text, run), encoding="utf-8")
        print("README.md: demo figures written from this run")
        return 0
    found = problems(text, run)
    for line in found:
        print(line)
    if not found:
        print("README.md: the demo figures match this run")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

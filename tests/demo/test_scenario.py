"""`codemode demo --json` end to end (a subprocess): the ledger's saving and the tasks' outputs.

The expected outputs are computed independently, straight from freshly generated sample data.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from typing import Any

import pytest

from codemode.demo import ACME_LEAD_ID, MEETING_DOCUMENT_ID
from codemode.demo.data import crm_db, docs_db

pytestmark = pytest.mark.slow  # the whole demo runs: about 10 s


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    home = tmp_path_factory.mktemp("demo-run")
    env = {**os.environ, "CODEMODE_STATE_DIR": str(home / "state")}
    done = subprocess.run(
        [sys.executable, "-m", "codemode", "demo", "--json"],
        capture_output=True,
        text=True,
        timeout=110,
        cwd=home,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # A one-line banner may precede the JSON document.
    start = done.stdout.index("\n[") + 1 if not done.stdout.startswith("[") else 0
    parsed = json.loads(done.stdout[start:])
    assert isinstance(parsed, list)
    tasks = {task["title"].split(":")[0]: task for task in parsed}
    assert {"Task 1", "Task 2"} <= set(tasks), list(tasks)
    return tasks


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The facts the demo should find, read with SQL from a fresh copy of the sample data."""
    directory = tmp_path_factory.mktemp("demo-expected")
    with sqlite3.connect(docs_db(directory)) as docs:
        (content,) = docs.execute(
            "SELECT content FROM documents WHERE id = ?", (MEETING_DOCUMENT_ID,)
        ).fetchone()
    with sqlite3.connect(crm_db(directory)) as crm:
        (leads,) = crm.execute("SELECT count(*) FROM leads").fetchone()
        hot = crm.execute(
            "SELECT id, deal_value FROM leads WHERE stage IN ('Negotiation', 'Proposal') "
            "AND deal_value >= 150000 ORDER BY deal_value DESC"
        ).fetchall()
    return {"transcript_chars": len(content), "leads": leads, "hot": hot}


def test_task1_copies_the_transcript_with_at_least_98_percent_fewer_tokens(
    ledgers: dict[str, dict[str, Any]], sample: dict[str, Any]
) -> None:
    task = ledgers["Task 1"]
    assert task["output"].strip() == (
        f"copied {sample['transcript_chars']:,} characters into Acme Corp's notes: True"
    )
    assert task["saving"] >= 0.98
    tool_calling = sum(line["tokens"] for line in task["tool_calling"])
    codemode = sum(line["tokens"] for line in task["codemode"])
    assert task["saving"] == pytest.approx(1 - codemode / tool_calling)
    # The transcript is about 50k tokens and goes through a tool-calling context twice.
    assert tool_calling > 90_000
    assert codemode < 2_000


def test_task2_filters_hundreds_of_rows_to_at_most_five(
    ledgers: dict[str, dict[str, Any]], sample: dict[str, Any]
) -> None:
    task = ledgers["Task 2"]
    header, *rows = task["output"].strip().splitlines()
    assert header.startswith(f"{sample['leads']} leads -> {len(sample['hot'])} late-stage deals")
    assert sample["leads"] >= 200
    assert 1 <= len(rows) <= 5
    shown = [
        (match.group(1), int(match.group(2).replace(",", "")))
        for match in (re.search(r"(LEAD-\d+).*\$\s*([\d,]+)$", row) for row in rows)
        if match
    ]
    assert shown == [tuple(row) for row in sample["hot"][:5]]
    assert shown[0][0] == ACME_LEAD_ID
    assert task["saving"] > 0.9


def test_task4_reuses_a_saved_skill_with_fewer_tokens(
    ledgers: dict[str, dict[str, Any]], sample: dict[str, Any]
) -> None:
    task = ledgers["Task 4"]
    saved, *rows = task["output"].strip().splitlines()
    assert saved.startswith("saved skill late_stage_deals (2 test(s) passed)")
    expected = [row for row in sample["hot"] if row[1] >= 250_000][:3]
    assert [(row.split()[0], int(row.split()[-1])) for row in rows] == [tuple(r) for r in expected]
    reuse = sum(line["tokens"] for line in task["codemode"])
    again = sum(line["tokens"] for line in task["tool_calling"])
    assert 0 < reuse < again
    assert task["saving"] == pytest.approx(1 - reuse / again)

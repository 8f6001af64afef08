"""`codemode run` through `main(argv)` with the scripted provider: the seeds' sales.csv task end
to end with result.md checked on disk, the JSON record, the round cap, approvals, errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from codemode.cli.main import main
from codemode.demo import server_commands

PLAN = (
    "Plan: read sales.csv, total the amounts per month, compare each month with the one "
    "before, write the totals and the month with the highest growth to result.md."
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
    lines = ["| month | total |", "|---|---:|"] + [f"| {m} | {t} |" for m, t in totals.items()]
    lines.append(f"Highest month-over-month growth: {best} ({rate:+.1%})")
    with open("result.md", "w") as f:
        f.write("\\n".join(lines) + "\\n")

totals = monthly_totals("sales.csv")
best, rate = best_growth(totals)
write_report(totals, best, rate)
print(best, f"{rate:+.1%}")
"""
MONTHS = {"2026-01": [100, 250], "2026-02": [300, 50], "2026-03": [900, 100], "2026-04": [400]}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "codemode.toml"
    path.write_text(
        f'[sandbox]\npool_size = 0\n[gateway]\nstate_dir = "{tmp_path / "state"}"\n',
        encoding="utf-8",
    )
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    with (folder / "sales.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["date", "region", "amount"])
        for month, amounts in MONTHS.items():
            for day, amount in enumerate(amounts, start=3):
                writer.writerow([f"{month}-{day:02d}", "North", amount])
    return folder


def script(tmp_path: Path, steps: list) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(steps), encoding="utf-8")
    return f"scripted:{path}"


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["run", "--json", *argv])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_the_sales_csv_task_end_to_end_writes_result_md(tmp_path, config, workspace, capsys):
    model = script(
        tmp_path,
        [
            {"thoughts": PLAN, "execute": SALES_CODE},
            {"answer": "result.md has the monthly totals; 2026-03 grew the most (+186%)."},
        ],
    )
    code, record = run_json(
        capsys,
        "Read sales.csv, total sales per month, find the month with the highest growth, "
        "save it to result.md",
        "--config",
        str(config),
        "--model",
        model,
        "--workspace",
        str(workspace),
    )
    assert code == 0
    assert record["status"] == "done"
    assert record["answer"].startswith("result.md has the monthly totals")
    assert isinstance(record["rounds"], list) and len(record["rounds"]) == 2
    first = record["rounds"][0]
    assert first["thoughts"] == PLAN and first["code"] == SALES_CODE
    assert first["result"]["status"] == "ok"
    assert first["result"]["files"]["created"] == ["result.md"]
    assert first["tokens_in"] > 0 and first["tokens_out"] > 0
    report = (workspace / "result.md").read_text(encoding="utf-8")
    assert "| 2026-01 | 350 |" in report and "| 2026-03 | 1000 |" in report
    assert "Highest month-over-month growth: 2026-03 (+185.7%)" in report


def test_live_output_shows_plan_code_result_and_the_ledger(tmp_path, config, workspace, capsys):
    model = script(
        tmp_path,
        [{"thoughts": PLAN, "execute": "print(open('sales.csv').readline())"}, {"answer": "done"}],
    )
    code = main(
        ["run", "look", "--config", str(config), "--model", model, "--workspace", str(workspace)]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "-- round 1/8" in out and "plan:" in out and "Plan: read sales.csv" in out
    assert "code:" in out and "result:" in out and "date,region,amount" in out
    assert "answer:\n    done" in out
    assert "ledger: done, 2 rounds," in out and "tokens in" in out


def test_the_round_cap_escalates_and_exits_1(tmp_path, config, workspace, capsys):
    model = script(tmp_path, [{"execute": "open('missing.csv')"}] * 5)
    code, record = run_json(
        capsys,
        "read missing.csv",
        "--config",
        str(config),
        "--model",
        model,
        "--workspace",
        str(workspace),
        "--max-rounds",
        "2",
    )
    assert code == 1
    assert record["status"] == "escalated" and len(record["rounds"]) == 2
    assert "FileNotFoundError" in record["summary"] and record["answer"] is None


def test_files_written_in_one_round_are_read_in_the_next_and_stay(
    tmp_path, config, workspace, capsys
):
    model = script(
        tmp_path,
        [
            {"execute": "open('notes.txt', 'w').write('kept')"},
            {"execute": "print(open('notes.txt').read())"},
            {"answer": "ok"},
        ],
    )
    _code, record = run_json(
        capsys,
        "keep a note",
        "--config",
        str(config),
        "--model",
        model,
        "--workspace",
        str(workspace),
    )
    assert record["rounds"][1]["result"]["stdout"] == "kept\n"
    assert (workspace / "notes.txt").read_text() == "kept"


@pytest.fixture
def crm_config(tmp_path: Path) -> Path:
    command, *args = server_commands(tmp_path / "data")["crm"]
    path = tmp_path / "crm.toml"
    path.write_text(
        f"[servers.crm]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"
        f'[sandbox]\npool_size = 0\n[gateway]\nstate_dir = "{tmp_path / "state"}"\n'
        '[agent]\nmodel = "scripted:unused"\nmax_rounds = 4\n',
        encoding="utf-8",
    )
    return path


UPDATE = (
    "from servers import crm\n"
    "crm.update_lead(lead_id='LEAD-0001', fields={'stage': 'Proposal'})\n"
    "print(crm.get_lead(lead_id='LEAD-0001')['stage'])"
)


@pytest.mark.parametrize(("mode", "status"), [("all", "ok"), ("none", "error")])
def test_an_approval_pause_in_a_run_is_answered(tmp_path, crm_config, capsys, mode, status):
    model = script(tmp_path, [{"execute": UPDATE}, {"answer": "done"}])
    _code, record = run_json(
        capsys,
        "move LEAD-0001 to Proposal",
        "--config",
        str(crm_config),
        "--model",
        model,
        "--approve",
        mode,
    )
    step = record["rounds"][0]["steps"][0]
    assert step["result"]["status"] == status
    assert [a["allowed"] for a in step["approvals"]] == [mode == "all"]
    assert step["approvals"][0]["tool"] == "crm.update_lead"
    if status == "ok":
        assert step["result"]["stdout"] == "Proposal\n"
    else:
        assert "denied the approval" in step["feedback"]
    assert record["max_rounds"] == 4  # from the config's [agent] table


def test_a_missing_api_key_is_a_clear_error_before_any_work(config, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert main(["run", "x", "--config", str(config), "--model", "openai:gpt-4o-mini"]) == 2
    err = capsys.readouterr().err
    assert "no OpenAI API key" in err and "export OPENAI_API_KEY" in err


def test_an_unknown_provider_and_a_bad_agent_setting_are_usage_errors(tmp_path, config, capsys):
    assert main(["run", "x", "--config", str(config), "--model", "gemini:pro"]) == 2
    assert "unknown model provider 'gemini'" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("[agent]\nmax_round = 3\n", encoding="utf-8")
    assert main(["run", "x", "--config", str(bad), "--model", "scripted:x"]) == 2
    err = capsys.readouterr().err
    assert "agent.max_round" in err and "max_rounds" in err

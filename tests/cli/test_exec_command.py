"""`codemode exec` through `main(argv)`: results, exit codes, config policies, approvals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemode.cli.main import main
from codemode.demo import server_commands


@pytest.fixture
def crm_config(tmp_path: Path) -> Path:
    command, *args = server_commands(tmp_path / "data")["crm"]
    config = tmp_path / "codemode.toml"
    config.write_text(
        f"[servers.crm]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"
        "[sandbox]\npool_size = 0\n"
        '[[policy.rules]]\ntools = ["crm.search_*"]\naction = "deny"\n'
        f'[gateway]\nstate_dir = "{tmp_path / "state"}"\n',
        encoding="utf-8",
    )
    return config


def run(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["exec", "--json", *argv])
    return code, json.loads(capsys.readouterr().out)


def test_exec_prints_the_result_and_exits_0_when_ok(tmp_path, capsys):
    script = tmp_path / "ok.py"
    script.write_text("print(6 * 7)")
    code, result = run(capsys, "--no-tools", str(script))
    assert code == 0
    assert (result["status"], result["stdout"]) == ("ok", "42\n")


def test_exec_exits_1_on_an_error(tmp_path, capsys):
    script = tmp_path / "bad.py"
    script.write_text("1/0")
    code, result = run(capsys, "--no-tools", str(script))
    assert code == 1
    assert result["error"]["type"] == "ZeroDivisionError"


def test_exec_applies_the_config_policy(crm_config, tmp_path, capsys):
    script = tmp_path / "search.py"
    script.write_text("from servers import crm\ncrm.search_leads(limit=1)\n")
    code, result = run(capsys, "--config", str(crm_config), str(script))
    assert code == 1
    assert "denied by policy" in result["error"]["message"]


@pytest.mark.parametrize(("mode", "status"), [("all", "ok"), ("none", "error")])
def test_exec_answers_approvals_as_told(crm_config, tmp_path, capsys, mode, status):
    script = tmp_path / "update.py"
    script.write_text(
        "from servers import crm\n"
        "crm.update_lead(lead_id='LEAD-0001', fields={'stage': 'Proposal'})\nprint('updated')\n"
    )
    code, result = run(capsys, "--config", str(crm_config), "--approve", mode, str(script))
    assert result["status"] == status
    assert (code == 0) == (status == "ok")
    if status == "error":
        assert "denied the approval" in result["error"]["message"]
    else:
        assert result["stdout"] == "updated\n"


def test_unreadable_file_is_a_clear_error(tmp_path, capsys):
    assert main(["exec", "--no-tools", str(tmp_path / "missing.py")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_exec_copies_the_files_out_and_says_where(tmp_path, capsys):
    script = tmp_path / "files.py"
    script.write_text(
        "import os\nos.makedirs('out', exist_ok=True)\n"
        "open('out/report.md', 'w').write('# done\\n')\n"
        "os.symlink('/etc/passwd', 'link.txt')\nprint('ok')"
    )
    saved = tmp_path / "saved"
    assert main(["exec", "--no-tools", "--files", str(saved), str(script)]) == 0
    printed = capsys.readouterr().out
    assert f"out/report.md -> {saved / 'out' / 'report.md'}" in printed
    assert "link.txt: " in printed  # named, with why it was not copied
    assert (saved / "out" / "report.md").read_text() == "# done\n"
    assert not (saved / "link.txt").exists()

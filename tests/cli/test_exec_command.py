"""`codemode exec` through `main(argv)`: results, exit codes, stderr, config policies, approvals."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from codemode.cli.exit_codes import ExitCode
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


def script(tmp_path: Path, code: str) -> str:
    path = tmp_path / "code.py"
    path.write_text(code, encoding="utf-8")
    return str(path)


def sandbox_config(tmp_path: Path, limits: str) -> str:
    path = tmp_path / "limits.toml"
    path.write_text(f"[sandbox]\npool_size = 0\n[sandbox.limits]\n{limits}\n", encoding="utf-8")
    return str(path)


def run(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["exec", "--json", *argv])
    return code, json.loads(capsys.readouterr().out)


def test_exec_prints_the_result_and_exits_0_when_ok(tmp_path, capsys):
    code, result = run(capsys, "--no-tools", script(tmp_path, "print(6 * 7)"))
    assert code == 0
    assert (result["status"], result["stdout"]) == ("ok", "42\n")


def test_exec_exits_1_on_an_uncaught_exception(tmp_path, capsys):
    code, result = run(capsys, "--no-tools", script(tmp_path, "1/0"))
    assert code == ExitCode.CODE_RAISED == 1
    assert result["error"]["type"] == "ZeroDivisionError"


@pytest.mark.parametrize("status", [3, 42])
def test_exec_exits_with_the_codes_own_status(tmp_path, capsys, status):
    code = main(["exec", "--no-tools", script(tmp_path, f"import sys\nsys.exit({status})")])
    assert code == status


def test_text_mode_keeps_stdout_and_stderr_apart(tmp_path, capsys):
    source = "import sys\nprint('to out')\nprint('to err', file=sys.stderr)\nprint('out again')\n"
    assert main(["exec", "--no-tools", script(tmp_path, source)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "to out\nout again\n"
    assert captured.err == "to err\n"


def test_a_traceback_goes_to_stderr_only(tmp_path, capsys):
    assert main(["exec", "--no-tools", script(tmp_path, "print('before')\n1/0\n")]) == 1
    captured = capsys.readouterr()
    assert captured.out == "before\n"
    assert "ZeroDivisionError" in captured.err


def test_json_keeps_the_code_stderr_on_stderr_too(tmp_path, capsys):
    code = main(
        ["exec", "--json", "--no-tools", script(tmp_path, "import sys\nsys.stderr.write('e\\n')")]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert captured.err == "e\n"
    assert json.loads(captured.out)["stderr"] == "e\n"


def test_json_gives_the_whole_stdout(tmp_path, capsys):
    # Far beyond what the model-facing result keeps (a tail of about 1,000 characters).
    source = "for i in range(20000):\n    print(f'line {i:05d}')\n"
    code, result = run(capsys, "--no-tools", script(tmp_path, source))
    assert code == 0
    lines = result["stdout"].splitlines()
    assert lines == [f"line {i:05d}" for i in range(20000)]
    assert result["truncated"]["stdout_bytes"] == 0


def test_max_output_bounds_the_json_stdout_and_says_so(tmp_path, capsys):
    source = "print('x' * 5000)\n"
    code, result = run(capsys, "--no-tools", "--max-output", "1000", script(tmp_path, source))
    assert code == 0
    assert result["stdout"].startswith("x" * 1000 + "\n[... 4,001 more bytes not kept")
    assert result["truncated"]["stdout_bytes"] == 4001


def test_timeout_exits_124(tmp_path, capsys):
    code = main(["exec", "--no-tools", "--timeout", "1", script(tmp_path, "while True: pass")])
    assert code == ExitCode.TIMEOUT == 124
    assert "timed out" in capsys.readouterr().err


def test_a_sandbox_limit_exits_125(tmp_path, capsys):
    config = sandbox_config(tmp_path, "cpu_time_s = 0.5")
    code = main(["exec", "--config", config, "--no-tools", script(tmp_path, "while True: pass")])
    assert code == ExitCode.LIMIT == 125
    assert "cpu_time limit" in capsys.readouterr().err


def test_a_sandbox_that_cannot_start_exits_126(tmp_path, capsys):
    # 1 MB of memory is too little for the interpreter to start.
    config = sandbox_config(tmp_path, "memory_bytes = 1000000")
    code = main(["exec", "--config", config, "--no-tools", script(tmp_path, "print(1)")])
    assert code == ExitCode.SANDBOX == 126
    err = capsys.readouterr().err.splitlines()
    # The warm pool may warn first (a gateway wants to know); the error ends the output.
    assert err[-1].startswith("codemode: error: the sandbox exited while starting")


def test_an_error_the_code_never_printed_is_shown_on_stderr(tmp_path, capsys, pets_spec):
    # The call is checked against the signatures before anything runs: no traceback is printed.
    source = "from servers import pets\nprint('not reached')\npets.list_petz()\n"
    code = main(["exec", "--openapi", str(pets_spec), script(tmp_path, source)])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out == ""
    assert captured.err.startswith("codemode: line 3: ")
    assert "did you mean 'list_pets'" in captured.err


def test_bad_arguments_exit_2(tmp_path, capsys):
    assert main(["exec", "--no-tools", "--timeout", "0", script(tmp_path, "1")]) == 2
    assert "--timeout must be positive" in capsys.readouterr().err


def test_a_server_that_did_not_load_stops_the_command(tmp_path, capsys):
    config = tmp_path / "broken.toml"
    config.write_text(
        f'[servers.gone]\ncommand = "{tmp_path / "no-such-server"}"\n'
        f"[servers.crm]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = ["-m", "codemode.demo.crm_server", "--data-dir", "{tmp_path / "data"}"]\n'
        f'[sandbox]\npool_size = 0\n[gateway]\nstate_dir = "{tmp_path / "state"}"\n',
        encoding="utf-8",
    )
    code_file = script(tmp_path, "print('ran')")
    assert main(["exec", "--config", str(config), code_file]) == ExitCode.SERVERS_NOT_LOADED
    captured = capsys.readouterr()
    assert "ran" not in captured.out
    assert "1 configured server did not load (gone:" in captured.err
    assert "--allow-partial" in captured.err

    assert main(["exec", "--config", str(config), "--allow-partial", code_file]) == 0
    captured = capsys.readouterr()
    assert captured.out == "ran\n"
    assert "server 'gone' did not load and is left out" in captured.err


def test_exec_applies_the_config_policy(crm_config, tmp_path, capsys):
    source = "from servers import crm\ncrm.search_leads(limit=1)\n"
    code, result = run(capsys, "--config", str(crm_config), script(tmp_path, source))
    assert code == 1
    assert "denied by policy" in result["error"]["message"]


@pytest.mark.parametrize(("mode", "status"), [("all", "ok"), ("none", "error")])
def test_exec_answers_approvals_as_told(crm_config, tmp_path, capsys, mode, status):
    source = (
        "from servers import crm\n"
        "print('before')\n"
        "crm.update_lead(lead_id='LEAD-0001', fields={'stage': 'Proposal'})\nprint('updated')\n"
    )
    code, result = run(
        capsys, "--config", str(crm_config), "--approve", mode, script(tmp_path, source)
    )
    assert result["status"] == status
    assert (code == 0) == (status == "ok")
    if status == "error":
        assert "denied the approval" in result["error"]["message"]
        assert result["stdout"] == "before\n"
    else:
        # Output from before and after the pause, in one stream.
        assert result["stdout"] == "before\nupdated\n"


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
    printed = capsys.readouterr()
    assert printed.out == "ok\n"
    assert f"out/report.md -> {saved / 'out' / 'report.md'}" in printed.err
    assert "link.txt -> not copied: " in printed.err  # named, with why
    assert (saved / "out" / "report.md").read_text() == "# done\n"
    assert not (saved / "link.txt").exists()


def test_a_server_that_did_not_load_is_reported_once(tmp_path):
    import subprocess

    missing = tmp_path / "missing-spec.json"
    result = subprocess.run(
        [sys.executable, "-m", "codemode", "search", "--openapi", str(missing), "refund"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CODEMODE_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert result.returncode == ExitCode.SERVERS_NOT_LOADED
    lines = [line for line in result.stderr.splitlines() if "missing-spec" in line]
    # One warning when it fails to load, one error when the command refuses to go on.
    assert len(lines) == 2, result.stderr
    assert "did not load" in lines[0] and lines[1].startswith("codemode: error:")

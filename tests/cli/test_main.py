"""The command line as a whole: --version, log flags, fast --help, shared arguments, demo opt-in,
a port in use."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from codemode.cli.main import build_parser, main
from codemode.cli.options import load_cli_config, log_level

SRC = Path(__file__).resolve().parents[2] / "src"


def test_version_is_the_installed_packages(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out == f"codemode {version('codemode')}\n"


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["exec", "x.py"], logging.WARNING),
        (["-v", "exec", "x.py"], logging.INFO),
        (["exec", "-vv", "x.py"], logging.DEBUG),
        (["-q", "exec", "x.py"], logging.ERROR),
        (["--log-level", "debug", "exec", "-q", "x.py"], logging.DEBUG),
        (["exec", "--log-level", "error", "x.py"], logging.ERROR),
    ],
)
def test_log_flags_work_before_and_after_the_command(argv, level):
    assert log_level(build_parser().parse_args(argv)) == level


def test_help_imports_no_heavy_module():
    probe = (
        "import sys\n"
        "from codemode.cli.main import build_parser\n"
        "build_parser().format_help()\n"
        "heavy = ('mcp', 'anyio', 'httpx', 'pydantic', 'numpy', 'uvicorn', 'codemode.engine',"
        " 'codemode.config', 'codemode.sandbox')\n"
        "print(sorted(name for name in heavy if name in sys.modules))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(SRC))
    done = subprocess.run(
        [sys.executable, "-c", probe],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_shared_arguments_mean_the_same_in_every_command(tmp_path):
    parser = build_parser()
    spec = str(tmp_path / "a.json")
    catalog_commands = ("exec", "search", "stubs", "tokens")
    for name in (*catalog_commands, "serve"):
        args = parser.parse_args([name, "--config", "c.toml", "--openapi", spec, *_required(name)])
        assert (args.config, args.openapi) == (Path("c.toml"), [Path(spec)])
    for name in catalog_commands:
        assert parser.parse_args([name, "--allow-partial", *_required(name)]).allow_partial


def _required(name: str) -> list[str]:
    return {"exec": ["x.py"], "search": ["query"], "stubs": ["out"]}.get(name, [])


def test_no_config_means_the_demo_servers_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config = load_cli_config(None, demo_allowed=True)
    assert sorted(config.servers) == ["crm", "docs", "mail"]
    assert "using the built-in demo servers" in capsys.readouterr().err


def test_openapi_without_config_means_no_demo_servers(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert dict(load_cli_config(None, demo_allowed=False).servers) == {}
    assert capsys.readouterr().err == ""


def test_a_local_codemode_toml_is_used_without_a_note(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "codemode.toml").write_text('[servers.api]\nopenapi = "spec.json"\n')
    assert list(load_cli_config(None, demo_allowed=True).servers) == ["api"]
    assert capsys.readouterr().err == ""


def test_openapi_alone_serves_only_that_spec(tmp_path, monkeypatch, capsys, pets_spec):
    monkeypatch.chdir(tmp_path)
    spec = pets_spec
    assert main(["tokens", "--json", "--openapi", str(spec)]) == 0
    captured = capsys.readouterr()
    assert sorted(json.loads(captured.out)) == ["pets", "total"]
    assert "demo" not in captured.err


def test_serve_on_a_port_in_use_is_one_line_with_the_fix(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["serve", "--transport", "http", "--port", str(port), "--openapi", "x.json"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert f"port {port} on 127.0.0.1 is already in use" in err
    assert "--port" in err


def test_catalog_commands_exit_69_when_a_server_did_not_load(tmp_path, capsys, pets_spec):
    spec = pets_spec
    config = tmp_path / "codemode.toml"
    config.write_text(
        f'[servers.gone]\ncommand = "{tmp_path / "no-such-server"}"\n'
        f'[servers.pets]\nopenapi = "{spec}"\n'
        f'[gateway]\nstate_dir = "{tmp_path / "state"}"\n'
    )
    assert main(["tokens", "--json", "--config", str(config)]) == 69
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "gone" in captured.err
    assert "--allow-partial" in captured.err
    assert main(["tokens", "--json", "--config", str(config), "--allow-partial"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)) == ["pets", "total"]


def test_the_readme_documents_every_exit_status():
    from codemode.cli.exit_codes import ExitCode

    readme = (SRC.parent / "README.md").read_text(encoding="utf-8")
    cli_section = readme.split("## CLI\n", 1)[1].split("\n## ", 1)[0]
    documented = {
        int(line.split("|")[1])
        for line in cli_section.splitlines()
        if line[:5].strip("| ").isdigit()
    }
    assert {int(code) for code in ExitCode} <= documented


def test_a_server_the_config_disabled_counts_as_not_loaded(
    tmp_path, monkeypatch, capsys, pets_spec
):
    monkeypatch.delenv("CODEMODE_TEST_UNSET", raising=False)
    spec = pets_spec
    config = tmp_path / "codemode.toml"
    config.write_text(
        '[servers.broken]\ncommand = "x"\nenv = { TOKEN = "${CODEMODE_TEST_UNSET}" }\n'
        f'[servers.pets]\nopenapi = "{spec}"\n'
        f'[gateway]\nstate_dir = "{tmp_path / "state"}"\n'
    )
    assert main(["tokens", "--json", "--config", str(config)]) == 69
    err = capsys.readouterr().err
    assert "broken: " in err and "CODEMODE_TEST_UNSET" in err
    assert main(["tokens", "--json", "--config", str(config), "--allow-partial"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)) == ["pets", "total"]


def test_the_listed_help_is_each_commands_own():
    from codemode.cli.main import COMMANDS, _command_module

    assert {name: _command_module(name).HELP for name in COMMANDS} == COMMANDS


def test_a_command_loads_only_its_own_module():
    probe = (
        "import sys\n"
        "from codemode.cli.main import main\n"
        "try:\n"
        "    main(['paths', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(n for n in sys.modules if n.startswith('codemode.cli.') and"
        " n.endswith('_command')))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(SRC))
    done = subprocess.run(
        [sys.executable, "-c", probe],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "['codemode.cli.paths_command']"

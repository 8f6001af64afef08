"""`codemode install`: the client's config entry, merged into the file people already have."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from codemode.cli.install_command import codemode_command
from codemode.cli.main import main


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    return home


@pytest.fixture
def gateway_config(tmp_path) -> Path:
    path = tmp_path / "servers.json"
    path.write_text('{"mcpServers": {}}')
    return path


def expected_entry(config: Path) -> dict:
    command, *args = codemode_command()
    return {"command": command, "args": [*args, "serve", "--config", str(config)]}


@pytest.mark.parametrize(
    ("client", "scope", "where"),
    [
        ("claude-desktop", "user", ".config/Claude/claude_desktop_config.json"),
        ("claude-code", "user", ".claude.json"),
        ("claude-code", "project", "../project/.mcp.json"),
        ("cursor", "user", ".cursor/mcp.json"),
        ("cursor", "project", "../project/.cursor/mcp.json"),
    ],
)
def test_install_writes_a_new_file_for_each_client(
    home, gateway_config, capsys, client, scope, where
):
    argv = ["install", client, "--scope", scope, "--config", str(gateway_config)]
    assert main(argv) == 0
    target = (home / where).resolve()
    written = json.loads(target.read_text())
    entry = written["mcpServers"]["codemode"]
    assert {k: v for k, v in entry.items() if k != "type"} == expected_entry(gateway_config)
    assert entry.get("type") == ("stdio" if client == "claude-code" else None)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert f"added 'codemode' in {target}" in capsys.readouterr().out


def test_install_merges_into_an_existing_file_and_backs_it_up(home, gateway_config, capsys):
    target = home / ".cursor" / "mcp.json"
    target.parent.mkdir()
    before = {"mcpServers": {"github": {"command": "npx", "args": ["gh"]}}, "other": [1, 2]}
    target.write_text(json.dumps(before))
    target.chmod(0o644)
    assert main(["install", "cursor", "--config", str(gateway_config)]) == 0
    after = json.loads(target.read_text())
    assert after["other"] == [1, 2]
    assert after["mcpServers"]["github"] == before["mcpServers"]["github"]
    assert after["mcpServers"]["codemode"] == expected_entry(gateway_config)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    backups = list(target.parent.glob("mcp.json.*.bak"))
    assert len(backups) == 1
    assert json.loads(backups[0].read_text()) == before
    assert f"(the old file is at {backups[0]})" in capsys.readouterr().out

    # The same entry again changes nothing and makes no new backup.
    assert main(["install", "cursor", "--config", str(gateway_config)]) == 0
    assert "nothing changed" in capsys.readouterr().out
    assert len(list(target.parent.glob("mcp.json.*.bak"))) == 1


def test_install_replaces_an_older_entry_of_the_same_name(home, gateway_config, capsys):
    target = home / "custom.json"
    target.write_text(json.dumps({"mcpServers": {"codemode": {"command": "old"}}}))
    assert main(["install", "cursor", "--path", str(target), "--config", str(gateway_config)]) == 0
    assert json.loads(target.read_text())["mcpServers"]["codemode"] == expected_entry(
        gateway_config
    )
    assert "replaced 'codemode'" in capsys.readouterr().out


def test_print_writes_nothing(home, gateway_config, capsys):
    assert main(["install", "claude-desktop", "--print", "--config", str(gateway_config)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == {"mcpServers": {"codemode": expected_entry(gateway_config)}}
    assert not (home / ".config").exists()


def test_a_broken_client_file_is_left_alone(home, gateway_config, capsys):
    target = home / ".claude.json"
    target.write_text("{not json")
    assert main(["install", "claude-code", "--config", str(gateway_config)]) == 2
    assert target.read_text() == "{not json"
    assert "is not valid JSON" in capsys.readouterr().err
    assert list(home.glob("*.bak")) == []


def test_install_refuses_to_make_codemode_start_itself(home, capsys):
    target = home / ".cursor" / "mcp.json"
    target.parent.mkdir()
    target.write_text('{"mcpServers": {"github": {"command": "npx"}}}')
    assert main(["install", "cursor", "--config", str(target)]) == 2
    assert "codemode would start itself" in capsys.readouterr().err
    assert "codemode" not in json.loads(target.read_text())["mcpServers"]


def test_without_config_the_entry_serves_the_demo_and_says_so(home, capsys):
    assert main(["install", "cursor", "--print"]) == 0
    captured = capsys.readouterr()
    entry = json.loads(captured.out)["mcpServers"]["codemode"]
    assert entry["args"][-1] == "serve"
    assert "built-in demo servers" in captured.err


def test_a_temporary_uvx_environment_is_named(home, gateway_config, monkeypatch, capsys):
    monkeypatch.setattr(sys, "prefix", str(home / ".cache" / "uv" / "archive-v0" / "hs-x1"))
    assert main(["install", "cursor", "--print", "--config", str(gateway_config)]) == 0
    assert "temporary environment" in capsys.readouterr().err


def test_a_missing_gateway_config_is_refused(home, tmp_path, capsys):
    missing = tmp_path / "nowhere.json"
    assert main(["install", "cursor", "--config", str(missing)]) == 2
    assert f"no config file at {missing}" in capsys.readouterr().err
    assert not (home / ".cursor").exists()

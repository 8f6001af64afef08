"""`codemode doctor` and `codemode paths` on this machine."""

from __future__ import annotations

import json

from codemode.cli.doctor_checks import check_node, check_privacy_scan
from codemode.cli.exit_codes import ExitCode
from codemode.cli.main import main
from codemode.config import CodemodeConfig, ServerConfig
from codemode.sandbox.backends import find_bwrap


def doctor(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["doctor", "--json", *argv])
    return code, json.loads(capsys.readouterr().out)


def test_doctor_proves_isolation_and_reports_every_check(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, report = doctor(capsys)
    checks = {check["name"]: check for check in report["checks"]}
    assert set(checks) == {
        "python",
        "bubblewrap",
        "user namespaces",
        "seccomp",
        "cgroups",
        "isolation",
        "node",
        "semantic search",
        "privacy scan",
        "state",
        "private storage",
    }
    # This machine runs the sandbox suite: isolation must hold here.
    assert checks["isolation"]["level"] == "ok", checks["isolation"]
    assert report["isolated"] is True
    assert code == ExitCode.OK
    assert find_bwrap() in checks["bubblewrap"]["detail"]
    assert set(report["paths"]) >= {"state", "audit_log", "definitions", "embeddings"}


def test_doctor_exits_126_when_isolation_is_off(tmp_path, capsys):
    config = tmp_path / "codemode.toml"
    config.write_text("[sandbox]\nunsafe_no_isolation = true\n")
    code, report = doctor(capsys, "--config", str(config))
    isolation = next(c for c in report["checks"] if c["name"] == "isolation")
    assert code == ExitCode.SANDBOX == 126
    assert report["isolated"] is False
    assert "unsafe_no_isolation" in isolation["detail"]
    assert isolation["fix"]


def test_doctor_text_says_what_will_not_work(tmp_path, capsys):
    config = tmp_path / "codemode.toml"
    config.write_text("[sandbox]\nunsafe_no_isolation = true\n")
    assert main(["doctor", "--config", str(config)]) == 126
    out = capsys.readouterr().out
    assert "What will not work, and the fix:" in out
    assert "- isolation: the config sets sandbox.unsafe_no_isolation" in out
    assert out.rstrip().endswith("codemode exec and serve will refuse to run it")


def test_node_check_names_the_servers_that_need_node(monkeypatch):
    server = ServerConfig(name="files", kind="stdio", command="npx", args=("-y", "x"))
    config = CodemodeConfig(servers={"files": server})
    monkeypatch.setenv("PATH", "/nonexistent")
    check = check_node(config)
    assert (check.level, "files" in check.detail) == ("fail", True)
    assert "Node.js" in check.fix


def test_paths_lists_state_and_caches(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    state = tmp_path / "state"
    config = tmp_path / "codemode.toml"
    config.write_text(f'[gateway]\nstate_dir = "{state}"\n')
    assert main(["paths", "--json"]) == 0
    paths = json.loads(capsys.readouterr().out)
    assert paths["config"]["path"] == str(config)
    assert paths["state"]["path"] == str(state)
    assert paths["audit_log"]["path"] == str(state / "audit.sqlite")
    assert paths["definitions"]["path"] == str(state / "definitions.sqlite")
    assert paths["state"]["exists"] is False


def test_paths_without_config_says_the_demo_is_used(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["paths"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("config       -\n")
    assert "built-in demo servers" in captured.err


def test_privacy_scan_check_says_whether_anchors_are_native(monkeypatch):
    # Hyperscan is a default dependency on this machine's platform: the native pass is used.
    assert check_privacy_scan().level == "ok"
    monkeypatch.setattr("codemode.privacy.fastscan.native_available", lambda: False)
    slow = check_privacy_scan()
    assert slow.level == "warn"
    assert "pure-Python" in slow.detail
    assert "pip install hyperscan" in slow.fix

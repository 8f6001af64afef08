"""``codemode serve`` takes its bearer tokens from a file (``--token-file``) or the environment;
``--token`` still works but warns that every local user sees it in ``ps``."""

from __future__ import annotations

import pytest

from codemode.cli.exit_codes import ExitCode
from codemode.cli.main import main


@pytest.fixture
def served(monkeypatch) -> list[dict]:
    """What ``serve`` was called with, instead of serving."""
    calls: list[dict] = []

    async def fake_serve(config, **options) -> None:
        calls.append(options)

    monkeypatch.setattr("codemode.gateway.serve.serve", fake_serve)
    monkeypatch.setattr("codemode.cli.serve_command.check_port_free", lambda host, port: None)
    return calls


def test_tokens_come_from_a_file_and_nothing_warns(tmp_path, served, capsys):
    tokens = tmp_path / "tokens"
    tokens.write_text("# the team's tokens\nalice=a-secret\n\nbob=b-secret\n", encoding="utf-8")
    code = main(["serve", "--transport", "http", "--token-file", str(tokens)])
    assert code == ExitCode.OK
    assert served[0]["tokens"] == ["alice=a-secret", "bob=b-secret"]
    assert "ps" not in capsys.readouterr().err


def test_a_token_on_the_command_line_still_works_but_warns(served, capsys):
    assert main(["serve", "--transport", "http", "--token", "alice=a-secret"]) == ExitCode.OK
    assert served[0]["tokens"] == ["alice=a-secret"]
    err = capsys.readouterr().err
    assert "visible to every local user in `ps`" in err and "--token-file" in err


@pytest.mark.parametrize("content", [None, "# only a comment\n\n"])
def test_a_missing_or_empty_token_file_is_a_usage_error(tmp_path, served, capsys, content):
    path = tmp_path / "tokens"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    code = main(["serve", "--transport", "http", "--token-file", str(path)])
    assert code == ExitCode.USAGE and not served
    assert "token file" in capsys.readouterr().err


def test_a_replica_that_generates_its_own_token_warns_that_the_others_get_401(
    capsys, monkeypatch
) -> None:
    from codemode.config import CodemodeConfig, GatewaySettings
    from codemode.gateway.serve import _authenticated

    monkeypatch.delenv("CODEMODE_TOKENS", raising=False)
    replica = CodemodeConfig(
        servers={}, gateway=GatewaySettings(shared_store="redis://127.0.0.1:6380/0")
    )
    _, table = _authenticated(object(), replica, [])
    assert len(table) == 1
    assert "every other replica's clients get 401" in capsys.readouterr().err
    _authenticated(object(), CodemodeConfig(servers={}), [])
    assert "401" not in capsys.readouterr().err
    _authenticated(object(), replica, ["alice=a-secret"])
    assert "401" not in capsys.readouterr().err

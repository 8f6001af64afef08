"""A broken server is disabled alone, with its reason; references and values as clients write them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from codemode.config import load_config

GOOD_TOML = '[servers.ok]\ncommand = "ok-server"\n'


def write(tmp_path: Path, text: str, name: str = "codemode.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def write_json(tmp_path: Path, servers: dict[str, object], **extra: object) -> Path:
    return write(tmp_path, json.dumps({"mcpServers": servers, **extra}), "mcp.json")


def split(problem: str) -> tuple[str, str]:
    """``"<file>, key '<key>': <what is wrong> (fix: <fix>)"`` -> (everything before, the fix)."""
    where_what, found, fix = problem.partition(" (fix: ")
    assert found, f"no fix in {problem!r}"
    return where_what, fix


@pytest.mark.parametrize(
    ("text", "key", "message", "fix"),
    [
        ('[servers.x]\ncomand = "a"\n', "servers.x.comand", "unknown key", "'command'"),
        ("[servers.x]\nenabled = true\n", "servers.x", "exactly one of", "add one"),
        ('[servers.x]\ncommand = "a"\nargz = []\n', "servers.x.argz", "unknown key", "'args'"),
        ('[servers.x]\ncommand = "a"\nurl = "http://h"\n', "servers.x", "exactly one", "keep"),
        ('[servers.x]\ncommand = "a"\nargs = "no"\n', "servers.x.args", "list of strings", "args"),
        ('[servers.x]\nurl = "ftp://h"\n', "servers.x.url", "not an http", "full URL"),
        ('[servers.x]\npython = "nomodule"\n', "servers.x.python", "module:attribute", "TOOLS"),
        (
            '[servers.x]\ncommand = "a"\nstart = "now"\n',
            "servers.x.start",
            "start policy",
            "first_use",
        ),
        (
            '[servers.x]\ncommand = "a"\nenabled = "yes"\n',
            "servers.x.enabled",
            "true or false",
            "enabled",
        ),
        ('[servers.x]\ncommand = "a"\ntools = "r*"\n', "servers.x.tools", "patterns", "tools ="),
        ('[servers.x]\ncommand = "a"\ntimeout_s = 0\n', "servers.x.timeout_s", "positive", "60"),
        (
            '[servers.x]\ncommand = "a"\nenv = { A = [1] }\n',
            "servers.x.env.A",
            "must be a string",
            "quote",
        ),
        ('[servers.x]\ncommand = ""\n', "servers.x.command", "empty", "value"),
        ("[servers]\nx = 3\n", "servers.x", "table/object", "[servers.x]"),
    ],
)
def test_a_broken_toml_server_is_disabled_alone(tmp_path, text, key, message, fix):
    path = write(tmp_path, GOOD_TOML + text)
    config = load_config(path)
    assert list(config.servers) == ["ok"]
    assert list(config.server_problems) == ["x"]
    where_what, hint = split(config.server_problems["x"])
    assert where_what.startswith(f"{path}, key {key!r}: ")
    assert message in where_what
    assert fix in hint


def test_a_bad_server_name_is_disabled_alone_and_a_fix_named(tmp_path):
    config = load_config(write(tmp_path, GOOD_TOML + '[servers."bad name"]\ncommand = "a"\n'))
    assert list(config.servers) == ["ok"]
    where_what, fix = split(config.server_problems["bad name"])
    assert "key 'servers.\"bad name\"'" in where_what and "server name" in where_what
    assert "'bad_name'" in fix


@pytest.mark.parametrize(
    ("entry", "key", "message", "fix"),
    [
        ({"type": "sse", "url": "http://h/sse"}, "mcpServers.x.type", "SSE", '"type": "http"'),
        ({"type": "http", "command": "a"}, "mcpServers.x.type", "mismatched", '"stdio"'),
        ({"type": "websocket", "url": "ws://h"}, "mcpServers.x.type", "unsupported", '"http"'),
        ({"type": 3, "url": "http://h"}, "mcpServers.x.type", "must be a string", "quote"),
        ({"command": "a", "foo": 1}, "mcpServers.x.foo", "unknown key", "use one of"),
        ({"command": "a", "disabled": "no"}, "mcpServers.x.disabled", "true or false", "disabled"),
        (
            {"command": "a", "env": {"A": {"B": 1}}},
            "mcpServers.x.env.A",
            "must be a string",
            "8080",
        ),
        ({"url": "${NOPE_URL}/mcp"}, "mcpServers.x.url", "NOPE_URL is not set", "export NOPE_URL"),
    ],
)
def test_a_broken_json_server_is_disabled_alone(tmp_path, monkeypatch, entry, key, message, fix):
    monkeypatch.delenv("NOPE_URL", raising=False)
    path = write_json(tmp_path, {"ok": {"command": "ok-server"}, "x": entry})
    config = load_config(path)
    assert list(config.servers) == ["ok"]
    where_what, hint = split(config.server_problems["x"])
    assert where_what.startswith(f"{path}, key {key!r}: ")
    assert message in where_what
    assert fix in hint


def test_a_list_entry_is_disabled_alone(tmp_path):
    config = load_config(write_json(tmp_path, {"ok": {"command": "ok-server"}, "x": []}))
    assert list(config.servers) == ["ok"]
    assert "must be a table/object, not a list" in config.server_problems["x"]


@pytest.mark.parametrize("reference", ["${NOPE_TOKEN}", "${env:NOPE_TOKEN}"])
def test_an_unset_variable_disables_only_its_server(tmp_path, monkeypatch, caplog, reference):
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    text = GOOD_TOML + f'[servers.x]\nurl = "http://h/mcp"\nheaders = {{ A = "{reference}" }}\n'
    path = write(tmp_path, text)
    with caplog.at_level(logging.WARNING, logger="codemode.config"):
        config = load_config(path)
    assert list(config.servers) == ["ok"] and config.servers["ok"].enabled
    where_what, fix = split(config.server_problems["x"])
    assert "key 'servers.x.headers.A'" in where_what and "NOPE_TOKEN is not set" in where_what
    assert "export NOPE_TOKEN" in fix
    logged = [record.getMessage() for record in caplog.records]
    assert logged == [f"server 'x' is disabled: {config.server_problems['x']}"]


def test_a_broken_server_that_is_disabled_anyway_is_not_a_problem(tmp_path, monkeypatch):
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    path = write_json(
        tmp_path,
        {
            "ok": {"command": "ok-server"},
            "off": {"command": "x", "env": {"T": "${NOPE_TOKEN}"}, "disabled": True},
        },
    )
    config = load_config(path)
    assert list(config.servers) == ["ok"]
    assert config.server_problems == {}


def test_both_reference_spellings_expand_everywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("CM_HOST", "api.test")
    monkeypatch.setenv("CM_TOKEN", "t0k")
    monkeypatch.delenv("CM_UNSET", raising=False)
    path = write_json(
        tmp_path,
        {
            "web": {
                "url": "https://${env:CM_HOST}/mcp",
                "headers": {"Authorization": "Bearer ${env:CM_TOKEN}", "X-Host": "${CM_HOST}"},
            },
            "local": {
                "command": "${CM_UNSET:-/usr/bin/server}",
                "args": ["--token", "${env:CM_TOKEN}", "--host=${CM_HOST}"],
                "env": {"TOKEN": "${env:CM_TOKEN}", "MIXED": "${CM_TOKEN}-${env:CM_HOST}"},
            },
        },
    )
    config = load_config(path)
    assert config.server_problems == {}
    web, local = config.servers["web"], config.servers["local"]
    assert web.url == "https://api.test/mcp"
    assert dict(web.headers) == {"Authorization": "Bearer t0k", "X-Host": "api.test"}
    assert local.command == "/usr/bin/server"
    assert local.args == ("--token", "t0k", "--host=api.test")
    assert dict(local.env) == {"TOKEN": "t0k", "MIXED": "t0k-api.test"}


def test_numbers_and_booleans_become_strings_as_clients_pass_them(tmp_path):
    path = write_json(
        tmp_path,
        {
            "db": {
                "command": "db-server",
                "args": ["--port", 5432, "--ratio", 0.5],
                "env": {"PORT": 8080, "DEBUG": True, "NAME": "x"},
            },
            "web": {"url": "http://h/mcp", "headers": {"X-Retries": 3}},
        },
    )
    config = load_config(path)
    assert config.server_problems == {}
    db = config.servers["db"]
    assert db.args == ("--port", "5432", "--ratio", "0.5")
    assert dict(db.env) == {"PORT": "8080", "DEBUG": "true", "NAME": "x"}
    assert dict(config.servers["web"].headers) == {"X-Retries": "3"}


def test_numeric_env_in_toml_becomes_a_string(tmp_path):
    config = load_config(write(tmp_path, '[servers.x]\ncommand = "a"\nenv = { PORT = 8080 }\n'))
    assert dict(config.servers["x"].env) == {"PORT": "8080"}


def test_a_broken_codemode_section_still_fails_the_whole_load(tmp_path):
    path = write_json(
        tmp_path, {"ok": {"command": "ok-server"}}, codemode={"gateway": {"max_sesions": 3}}
    )
    with pytest.raises(Exception, match="did you mean 'max_sessions'") as caught:
        load_config(path)
    assert getattr(caught.value, "key", None) == "codemode.gateway.max_sesions"


def test_a_good_config_has_no_problems(tmp_path):
    assert load_config(write(tmp_path, GOOD_TOML)).server_problems == {}

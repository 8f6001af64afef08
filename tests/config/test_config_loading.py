"""load_config: codemode.toml and mcpServers JSON, env references, and every error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from codemode.config import load_config
from codemode.errors import ConfigError


def write(tmp_path: Path, text: str, name: str = "codemode.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_toml_all_server_kinds(tmp_path, monkeypatch):
    monkeypatch.setenv("GH_TOKEN", "secret-1")
    monkeypatch.delenv("MISSING_WITH_DEFAULT", raising=False)
    path = write(
        tmp_path,
        """
[servers.files]
command = "npx"
args = ["-y", "server-filesystem", "${MISSING_WITH_DEFAULT:-/data}"]
env = { TOKEN = "${GH_TOKEN}" }
cwd = "work"
start = "startup"
tools = ["read_*"]
timeout_s = 5

[servers.remote]
url = "https://example.test/mcp"
headers = { Authorization = "Bearer ${GH_TOKEN}" }

[servers.stripe]
openapi = "specs/stripe.json"
base_url = "https://api.stripe.test"

[servers.local]
python = "my_tools:TOOLS"
enabled = false

[sandbox]
pool_size = 3

[sandbox.limits]
wall_time_s = 5

[gateway]
max_sessions = 8
state_dir = "state"
""",
    )
    config = load_config(path)
    files = config.servers["files"]
    assert (files.kind, files.command) == ("stdio", "npx")
    assert files.args == ("-y", "server-filesystem", "/data")
    assert dict(files.env) == {"TOKEN": "secret-1"}
    assert files.cwd == str(tmp_path / "work")
    assert files.start == "startup" and files.tools == ("read_*",) and files.timeout_s == 5.0
    remote = config.servers["remote"]
    assert remote.kind == "http" and dict(remote.headers) == {"Authorization": "Bearer secret-1"}
    stripe = config.servers["stripe"]
    assert stripe.openapi == str(tmp_path / "specs" / "stripe.json")
    assert stripe.base_url == "https://api.stripe.test"
    assert config.servers["local"].python == "my_tools:TOOLS"
    assert [s.name for s in config.enabled_servers()] == ["files", "remote", "stripe"]
    assert config.sandbox.pool_size == 3 and config.sandbox.limits.wall_time_s == 5
    assert config.gateway.max_sessions == 8 and config.gateway.session_idle_timeout_s == 900
    assert config.gateway.state_dir == tmp_path / "state"
    assert config.source == path


def test_mcp_servers_json(tmp_path, monkeypatch):
    monkeypatch.setenv("API_KEY", "k")
    path = write(
        tmp_path,
        json.dumps(
            {
                "mcpServers": {
                    "memory": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-memory"],
                        "env": {"KEY": "${API_KEY}"},
                        "autoApprove": ["read_graph"],
                    },
                    "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X": "1"}},
                    "off": {"command": "x", "disabled": True},
                },
                "globalShortcut": "Ctrl+Space",
            }
        ),
        name="claude_desktop_config.json",
    )
    config = load_config(path)
    memory = config.servers["memory"]
    assert memory.kind == "stdio" and memory.args[-1] == "@modelcontextprotocol/server-memory"
    assert dict(memory.env) == {"KEY": "k"}
    assert config.servers["web"].url == "http://127.0.0.1:9/mcp"
    assert config.servers["off"].enabled is False
    assert [s.name for s in config.enabled_servers()] == ["memory", "web"]


def test_default_config_is_the_demo_servers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(None)
    assert config.source is None
    assert list(config.servers) == ["docs", "crm", "mail"]
    docs = config.servers["docs"]
    assert docs.command == sys.executable and docs.args == ("-m", "codemode.demo.docs_server")


def test_local_codemode_toml_is_used_when_present(tmp_path, monkeypatch):
    write(tmp_path, '[servers.one]\ncommand = "one"\n')
    monkeypatch.chdir(tmp_path)
    assert list(load_config(None).servers) == ["one"]


def test_state_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CODEMODE_STATE_DIR", str(tmp_path / "s"))
    assert load_config(write(tmp_path, "")).gateway.state_dir == tmp_path / "s"


def test_fingerprint_changes_with_config(tmp_path):
    a = load_config(write(tmp_path, '[servers.x]\ncommand = "a"\n', "a.toml")).servers["x"]
    b = load_config(write(tmp_path, '[servers.x]\ncommand = "b"\n', "b.toml")).servers["x"]
    a2 = load_config(write(tmp_path, '[servers.x]\ncommand = "a"\n', "c.toml")).servers["x"]
    assert a.fingerprint() == a2.fingerprint() != b.fingerprint()


@pytest.mark.parametrize(
    ("text", "key", "message", "fix"),
    [
        ('[serverz.x]\ncommand = "a"\n', "serverz", "unknown key", "'servers'"),
        ("[gateway]\nmax_sessions = 0\n", "gateway.max_sessions", "positive", "max_sessions"),
        ("[gateway]\nidle = 3\n", "gateway.idle", "unknown key", "session_idle_timeout_s"),
        ("[sandbox]\npool = 3\n", "sandbox.pool", "unknown key", "pool_size"),
        ("servers = 3\n", "servers", "table of servers", "[servers.NAME]"),
        ("[servers\n", None, "not valid TOML", "syntax"),
    ],
)
def test_toml_errors_name_file_key_and_fix(tmp_path, text, key, message, fix):
    """A broken codemode section (not a server) fails the whole load."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    error = info.value
    assert error.path == str(path)
    assert error.key == key
    assert message in str(error)
    assert error.fix and fix in error.fix
    assert str(path) in str(error)


@pytest.mark.parametrize(
    ("data", "key", "message"),
    [
        ({"servers": {}}, "mcpServers", "mcpServers"),
        ([], "mcpServers", "mcpServers"),
        ({"mcpServers": []}, "mcpServers", "object of servers"),
        (
            {"mcpServers": {}, "codemode": {"sandbox": {"pool_size": -1}}},
            "codemode.sandbox.pool_size",
            "0 or more",
        ),
    ],
)
def test_json_errors(tmp_path, data, key, message):
    path = write(tmp_path, json.dumps(data), "mcp.json")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == key and message in str(info.value) and info.value.fix


def test_bad_json_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(write(tmp_path, "{nope", "x.json"))
    with pytest.raises(ConfigError, match="not found") as info:
        load_config(tmp_path / "absent.toml")
    assert info.value.fix


POLICY_TOML = """
[servers.crm]
command = "crm"

[policy]
destructive = "deny"
[[policy.rules]]
tools = ["crm.delete_*"]
action = "ask"

[privacy.flows]
crm = ["mail"]
"""


def test_policy_and_privacy_load_from_toml(tmp_path):
    config = load_config(write(tmp_path, POLICY_TOML))
    assert config.policy.destructive == "deny"
    assert config.policy.rules[0].action == "ask"
    assert config.privacy.may_flow("crm", "mail") is True
    assert config.privacy.may_flow("crm", "other") is False


def test_policy_and_privacy_load_from_the_json_codemode_key(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {"crm": {"command": "crm"}},
                "codemode": {
                    "policy": {"rules": [{"tools": ["crm.delete_*"], "action": "deny"}]},
                    "privacy": {"flows": {"crm": ["mail"]}},
                },
            }
        )
    )
    config = load_config(path)
    assert config.policy.rules[0].action == "deny"
    assert config.privacy.may_flow("crm", "mail") is True


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ('[[policy.rules]]\ntools = ["crm.*"]\naction = "alow"\n', "policy.rules[0].action"),
        ('[policy]\nmode = "readonly"\n', "policy.mode"),
        ('[privacy]\npatterns = { BAD = "(" }\n', "privacy.patterns.BAD"),
    ],
)
def test_bad_policy_and_privacy_rules_name_the_file_and_key(tmp_path, body, key):
    path = write(tmp_path, '[servers.crm]\ncommand = "crm"\n' + body)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.key == key
    assert str(path) in str(caught.value)
    assert caught.value.fix


def test_unknown_section_under_the_json_codemode_key_is_an_error(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {}, "codemode": {"polcy": {}}}))
    with pytest.raises(ConfigError, match="did you mean 'policy'"):
        load_config(path)


def test_gateway_state_dir_is_relative_to_the_file_in_both_formats(tmp_path):
    toml = load_config(write(tmp_path, '[gateway]\nstate_dir = "state"\n'))
    data = {"mcpServers": {}, "codemode": {"gateway": {"state_dir": "other"}}}
    from_json = load_config(write(tmp_path, json.dumps(data), "mcp.json"))
    assert toml.gateway.state_dir == tmp_path / "state"
    assert from_json.gateway.state_dir == tmp_path / "other"


@pytest.mark.parametrize(
    ("body", "key", "message"),
    [
        ("session_idle_timeout_s = true", "gateway.session_idle_timeout_s", "must be a number"),
        ("session_idle_timeout_s = -5", "gateway.session_idle_timeout_s", "positive number"),
        ("max_sessions = 2.5", "gateway.max_sessions", "whole number"),
        ("state_dir = 3", "gateway.state_dir", "path"),
    ],
)
def test_gateway_values(tmp_path, body, key, message):
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, f"[gateway]\n{body}\n"))
    assert caught.value.key == key and message in caught.value.message and caught.value.fix


def test_audit_and_oracle_settings_load_from_toml(tmp_path):
    text = POLICY_TOML + (
        "\n[privacy.oracle]\ncalls_per_session = 40\n\n[audit]\nmax_bytes = 4096\n"
        "events_per_session = 100\n"
    )
    config = load_config(write(tmp_path, text))
    assert config.privacy.oracle.calls_per_session == 40
    assert config.audit.max_bytes == 4096
    assert config.audit.events_per_session == 100
    with pytest.raises(ConfigError, match=r"audit\.retention_days"):
        load_config(write(tmp_path, POLICY_TOML + "\n[audit]\nretention_days = -1\n"))


def test_load_config_takes_a_str_path(tmp_path: Path) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text('[servers.demo]\ncommand = "python3"\n')
    assert set(load_config(str(path)).servers) == {"demo"}

"""The [agent] config table: defaults, per-model settings by exact name or glob, clear errors."""

from __future__ import annotations

import pytest

from codemode.agent import AgentSettings, ModelSettings
from codemode.config import load_config
from codemode.errors import ConfigError


def test_the_agent_table_is_read_from_the_config_file(tmp_path):
    path = tmp_path / "codemode.toml"
    path.write_text(
        '[agent]\nmodel = "openai:small"\nmax_rounds = 5\n'
        '[agent.models."openai:*"]\nformat = "tools"\n'
        '[agent.models."openai:small"]\nformat = "fenced"\ncontext_tokens = 2048\n',
        encoding="utf-8",
    )
    settings = load_config(path).agent
    assert (settings.model, settings.max_rounds) == ("openai:small", 5)
    assert settings.for_model("openai:small") == ModelSettings(format="fenced", context_tokens=2048)
    assert settings.for_model("openai:gpt-4o").format == "tools"
    assert settings.for_model("anthropic:claude") == ModelSettings()


def test_defaults_without_a_table():
    settings = AgentSettings()
    assert (settings.max_rounds, settings.model) == (8, "anthropic:claude-sonnet-4-5")


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"max_round": 3}, "max_round"),
        ({"max_rounds": 0}, "max_rounds"),
        ({"models": {"openai:x": {"format": "xml"}}}, "format"),
    ],
)
def test_mistakes_name_the_key(tmp_path, table, key):
    import json

    path = tmp_path / "mcp.json"  # the same [agent] table under the JSON file's "codemode" key
    path.write_text(json.dumps({"mcpServers": {}, "codemode": {"agent": table}}), encoding="utf-8")
    with pytest.raises(ConfigError, match=key.replace(".", r"\.").replace('"', "")) as raised:
        load_config(path)
    assert str(path) in str(raised.value)

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
    settings = AgentSettings.from_table(load_config(path).agent, str(path))
    assert (settings.model, settings.max_rounds) == ("openai:small", 5)
    assert settings.for_model("openai:small") == ModelSettings(format="fenced", context_tokens=2048)
    assert settings.for_model("openai:gpt-4o").format == "tools"
    assert settings.for_model("anthropic:claude") == ModelSettings()


def test_defaults_without_a_table():
    settings = AgentSettings.from_table({})
    assert (settings.max_rounds, settings.model) == (8, "anthropic:claude-sonnet-4-5")


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"max_round": 3}, "agent.max_round"),
        ({"max_rounds": 0}, "agent.max_rounds"),
        ({"models": {"openai:x": {"format": "xml"}}}, "agent.models.openai:x.format"),
    ],
)
def test_mistakes_name_the_key(table, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        AgentSettings.from_table(table, "codemode.toml")

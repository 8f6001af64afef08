"""[sandbox] and [sandbox.limits]: defaults, values from a table, and an error for each mistake."""

from __future__ import annotations

import pytest

from codemode.errors import ConfigError
from codemode.sandbox import Limits, SandboxSettings
from codemode.settings.sandbox import GiB


def test_defaults() -> None:
    settings = SandboxSettings.from_mapping({}, source="codemode.toml")
    assert settings == SandboxSettings()
    assert settings.pool_size == 2 and settings.python_paths is None
    assert settings.unsafe_no_isolation is False
    assert settings.limits.wall_time_s == 60.0 and settings.limits.memory_bytes == 2 * GiB


def test_a_table_with_limits() -> None:
    settings = SandboxSettings.from_mapping(
        {
            "pool_size": 0,
            "python_paths": ["/opt/site"],
            "limits": {"wall_time_s": 5, "memory_bytes": 5e8, "processes": 8},
        },
        source="codemode.toml",
    )
    assert settings.pool_size == 0
    assert settings.python_paths == ("/opt/site",)
    assert settings.limits == Limits(wall_time_s=5.0, memory_bytes=500_000_000, processes=8)
    assert isinstance(settings.limits.memory_bytes, int)


@pytest.mark.parametrize(
    ("table", "key", "message", "fix"),
    [
        ({"pool": 3}, "sandbox.pool", "unknown key 'pool'", "did you mean 'pool_size'?"),
        ({"limits": {"wall_time": 3}}, "sandbox.limits.wall_time", "unknown key", "'wall_time_s'"),
        ({"pool_size": -1}, "sandbox.pool_size", "must be 0 or more", "pool_size = 2"),
        ({"pool_size": True}, "sandbox.pool_size", "must be a whole number", "pool_size = 2"),
        ({"limits": {"wall_time_s": 0}}, "sandbox.limits.wall_time_s", "positive", "= 60"),
        ({"limits": {"processes": 1.5}}, "sandbox.limits.processes", "whole number", "= 64"),
        ({"limits": 3}, "sandbox.limits", "must be a table/object", "[sandbox.limits]"),
        ({"python_paths": "/opt"}, "sandbox.python_paths", "list of directory paths", '["/opt"]'),
        ({"unsafe_no_isolation": "yes"}, "sandbox.unsafe_no_isolation", "true or false", "= true"),
    ],
)
def test_each_mistake_names_its_key_and_fix(table, key, message, fix) -> None:
    with pytest.raises(ConfigError) as caught:
        SandboxSettings.from_mapping(table, source="codemode.toml")
    error = caught.value
    assert (error.path, error.key) == ("codemode.toml", key)
    assert message in error.message
    assert fix in (error.fix or "")


def test_settings_are_frozen() -> None:
    with pytest.raises(ValueError, match="frozen"):
        SandboxSettings().pool_size = 3  # type: ignore[misc]

"""``[gateway] shared_store`` and ``session_lease_s`` in a config file."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.config import load_config
from codemode.errors import ConfigError


def write(tmp_path: Path, gateway: str) -> Path:
    path = tmp_path / "codemode.toml"
    path.write_text(f"[gateway]\n{gateway}\n", encoding="utf-8")
    return path


def test_a_shared_store_and_its_lease_are_read_from_the_gateway_table(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, 'shared_store = "redis://10.0.0.5:6379/2"\nsession_lease_s = 4')
    )
    assert config.gateway.shared_store == "redis://10.0.0.5:6379/2"
    assert config.gateway.session_lease_s == 4.0
    assert load_config(write(tmp_path, "")).gateway.shared_store is None  # one process


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('shared_store = "http://redis:6379"', "must be a redis://"),
        ("shared_store = 6379", "gateway.shared_store"),
        ("session_lease_s = 0", "gateway.session_lease_s"),
    ],
)
def test_a_wrong_shared_store_setting_names_the_key_and_the_fix(
    tmp_path: Path, line: str, problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem) as caught:
        load_config(write(tmp_path, line))
    assert "fix:" in str(caught.value)

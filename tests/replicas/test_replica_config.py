"""``[gateway] shared_store`` and ``session_lease_s`` in a config file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codemode.cli.doctor_checks import check_shared_store
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


def test_doctor_checks_the_shared_store(redis_server: Any) -> None:
    found = check_shared_store(redis_server.url)
    assert (found.level, found.detail) == (
        "ok",
        f"{redis_server.url} answers; 0 replica(s) alive on it",
    )
    redis_server.stop()
    down = check_shared_store(redis_server.url)
    assert down.level == "fail" and "did not answer" in down.detail

"""``[gateway] shared_store``, ``session_lease_s`` and the store's key in a config file."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from codemode.cli.doctor_checks import check_shared_store, check_shared_store_key
from codemode.cli.main import main
from codemode.config import GatewaySettings, load_config
from codemode.errors import ConfigError
from codemode.replicas.audit import shared_digest_key
from codemode.replicas.connection import SharedRedis
from codemode.replicas.keys import KEY_ENV, OLD_KEYS_ENV, parse_key, read_key_file, store_sealer
from tests.replicas.conftest import key_file


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


def test_key_files_are_read_relative_to_the_config_file(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            'shared_store = "redis://h:6379/0"\nshared_store_key_file = "keys/now.key"\n'
            'shared_store_old_key_files = ["keys/old.key"]',
        )
    )
    assert config.gateway.shared_store_key_file == tmp_path / "keys" / "now.key"
    assert config.gateway.shared_store_old_key_files == [tmp_path / "keys" / "old.key"]


def test_a_key_file_others_can_read_is_refused_naming_chmod(tmp_path: Path) -> None:
    path = key_file(tmp_path / "store.key", mode=0o644)
    gateway = GatewaySettings(shared_store="redis://h:6379/0", shared_store_key_file=path)
    with pytest.raises(ConfigError, match=r"mode 0644") as caught:
        store_sealer(gateway, environ={})
    assert f"chmod 600 {path}" in str(caught.value)
    assert "gateway.shared_store_key_file" in str(caught.value)
    path.chmod(0o600)
    assert store_sealer(gateway, environ={}).encrypted


def test_a_key_is_read_as_base64_or_hex_from_a_file_or_the_environment(tmp_path: Path) -> None:
    material = os.urandom(32)
    b64 = key_file(tmp_path / "b64.key", material)
    hexed = tmp_path / "hex.key"
    hexed.write_text(material.hex())
    hexed.chmod(0o400)
    ids = {
        read_key_file(b64, key="k").key_id,
        read_key_file(hexed, key="k").key_id,
        parse_key(base64.b64encode(material).decode(), origin="env", key="k").key_id,
    }
    assert len(ids) == 1
    from_env = store_sealer(
        GatewaySettings(), environ={KEY_ENV: base64.b64encode(material).decode()}
    )
    from_file = store_sealer(GatewaySettings(shared_store_key_file=b64), environ={})
    sealed = from_env.seal(b"pii", bound_to="k")
    assert from_file.open(sealed, bound_to="k") == b"pii"


@pytest.mark.parametrize(
    ("settings", "environ", "problem"),
    [
        ({"shared_store_key_file": "short.key"}, {}, "does not hold a 32-byte key"),
        ({"shared_store_key_file": "missing.key"}, {}, "cannot read the key file"),
        ({"shared_store_key_file": "good.key"}, {KEY_ENV: "x"}, "both"),
        ({"shared_store_old_key_files": ["good.key"]}, {}, "no current key"),
        ({}, {OLD_KEYS_ENV: base64.b64encode(bytes(32)).decode()}, "no current key"),
        ({}, {KEY_ENV: "not base64!"}, "does not hold a 32-byte key"),
    ],
)
def test_a_key_that_cannot_be_used_names_the_setting_and_the_fix(
    tmp_path: Path, settings: dict[str, Any], environ: dict[str, str], problem: str
) -> None:
    (tmp_path / "short.key").write_text("c2hvcnQ=")
    (tmp_path / "short.key").chmod(0o600)
    key_file(tmp_path / "good.key")
    gateway = GatewaySettings.model_validate(settings, context={"base_dir": tmp_path})
    with pytest.raises(ConfigError, match=problem) as caught:
        store_sealer(gateway, environ=environ)
    assert "fix:" in str(caught.value)


def test_no_key_stores_values_as_they_are() -> None:
    sealer = store_sealer(GatewaySettings(shared_store="redis://h:6379/0"), environ={})
    assert not sealer.encrypted
    assert sealer.seal(b"value", bound_to="k") == b"value"


def test_doctor_says_whether_the_shared_store_is_encrypted_and_by_this_key(
    tmp_path: Path, redis_server: Any
) -> None:
    store = f'shared_store = "{redis_server.url}"'
    no_key = check_shared_store_key(load_config(write(tmp_path, store)))
    assert no_key.level == "warn" and "unencrypted" in no_key.detail
    assert "codemode replicas keygen" in no_key.fix
    path = key_file(tmp_path / "store.key", mode=0o640)
    keyed = load_config(write(tmp_path, f'{store}\nshared_store_key_file = "{path}"'))
    refused = check_shared_store_key(keyed)
    assert refused.level == "fail" and "chmod 600" in refused.fix
    path.chmod(0o600)
    found = check_shared_store_key(keyed)
    assert found.level == "ok" and found.detail.startswith("AES-256-GCM with key id")
    # Once a replica sealed the store with this key, another key (or none) is a failure.
    redis = SharedRedis(redis_server.url)
    shared_digest_key(redis, store_sealer(keyed.gateway, environ={}))
    redis.close()
    assert check_shared_store_key(keyed).level == "ok"
    other = key_file(tmp_path / "other.key", unlike=path)
    wrong = check_shared_store_key(
        load_config(write(tmp_path, f'{store}\nshared_store_key_file = "{other}"'))
    )
    assert wrong.level == "fail" and "key this replica does not have" in wrong.detail
    unkeyed = check_shared_store_key(load_config(write(tmp_path, store)))
    assert unkeyed.level == "fail" and "this replica has no key" in unkeyed.detail


def test_keygen_writes_a_key_only_its_owner_reads_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store.key"
    assert main(["replicas", "keygen", str(path)]) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = read_key_file(path, key="k")
    assert f'shared_store_key_file = "{path}"' in capsys.readouterr().out
    assert main(["replicas", "keygen", str(path)]) == 2
    assert "never overwritten" in capsys.readouterr().err
    assert read_key_file(path, key="k") == key  # unchanged
    assert main(["replicas", "keygen", "-"]) == 0
    printed = capsys.readouterr().out.strip()
    assert parse_key(printed, origin="stdout", key="k").material != key.material


def test_a_key_file_reached_through_a_link_is_judged_by_the_files_own_mode(
    tmp_path: Path,
) -> None:
    # How a Kubernetes secret volume presents a key: a link to the file holding it.
    (tmp_path / "data").mkdir()
    target = key_file(tmp_path / "data" / "store.key", mode=0o400)
    link = tmp_path / "store.key"
    link.symlink_to(target)
    assert read_key_file(link, key="k").material == read_key_file(target, key="k").material
    target.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        read_key_file(link, key="k")

"""Gateway replicas and the shared store's key: the warning without one, a replica with the
wrong key, and a session whose sealed vault was changed in the store."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.errors import SharedStoreDecryptError
from tests.replicas.conftest import Crm, key_file, replica_config

pytestmark = pytest.mark.anyio

CUSTOMER = "from servers import crm\nprint(crm.customer()['email'])"


def engine(tmp_path: Path, name: str, url: str, crm: Crm, key: Path | None) -> Codemode:
    return Codemode(
        replica_config(tmp_path, name, url, key),
        catalog=Catalog([PythonConnector("crm", crm.functions())]),
        semantic=False,
    )


def _unencrypted_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and "NOT ENCRYPTED" in record.getMessage()
    ]


async def test_without_a_key_a_replica_warns_once_and_stores_values_plain(
    redis_server: Any, crm: Crm, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with engine(tmp_path, "a", redis_server.url, crm, None) as a:
        first = await a.execute(CUSTOMER)
        again = await a.execute(CUSTOMER, session=first.session)
        assert first.status == again.status == "ok", first.render_text()
    (warning,) = _unencrypted_warnings(caplog)  # once, however many values were written
    assert "vault values" in warning and redis_server.url in warning
    assert 'shared_store_key_file = "PATH"' in warning and "codemode replicas keygen" in warning


async def test_with_a_key_there_is_no_warning(
    redis_server: Any, crm: Crm, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    key = key_file(tmp_path / "store.key")
    async with engine(tmp_path, "a", redis_server.url, crm, key) as a:
        assert (await a.execute(CUSTOMER)).status == "ok"
    assert _unencrypted_warnings(caplog) == []
    assert "values are sealed: AES-256-GCM" in caplog.text


async def test_a_replica_with_another_key_refuses_to_start(
    redis_server: Any, crm: Crm, tmp_path: Path
) -> None:
    first = key_file(tmp_path / "a.key")
    async with engine(tmp_path, "a", redis_server.url, crm, first):
        other = key_file(tmp_path / "b.key", unlike=first)
        wrong = engine(tmp_path, "b", redis_server.url, crm, other)
        with pytest.raises(SharedStoreDecryptError, match="key this replica does not have"):
            async with wrong:
                pass
        none = engine(tmp_path, "c", redis_server.url, crm, None)
        with pytest.raises(SharedStoreDecryptError, match="this replica has no key"):
            async with none:
                pass


@pytest.mark.parametrize("replicas", ["encrypted"], indirect=True)
async def test_a_session_whose_vault_was_changed_fails_alone_and_clearly(
    replicas: tuple[Codemode, Codemode], caplog: pytest.LogCaptureFixture
) -> None:
    a, b = replicas
    got = await a.execute(CUSTOMER)
    token, handle = got.stdout.strip(), got.session
    assert token.startswith("<EMAIL_") and handle is not None
    assert a.shared is not None
    redis = a.shared.redis
    key = redis.key("vault", handle)
    blob = bytearray(redis.client.hget(key, token))
    blob[20] ^= 0x80
    redis.client.hset(key, token, bytes(blob))
    # B loads the session's vault to continue it: refused, for this session only.
    with pytest.raises(SharedStoreDecryptError, match=r"cannot continue.*integrity check"):
        await b.execute(f"print({token!r})", session=handle)
    assert any(r.levelno == logging.ERROR and token in r.getMessage() for r in caplog.records)
    assert "ada.lovelace" not in caplog.text
    # Both replicas go on serving other sessions.
    for replica in (b, a):
        other = await replica.execute(CUSTOMER)
        assert other.status == "ok" and other.session != handle, other.render_text()


@pytest.mark.parametrize("replicas", ["encrypted"], indirect=True)
async def test_a_changed_checkpoint_is_said_plainly_in_the_result_never_restored(
    replicas: tuple[Codemode, Codemode],
) -> None:
    a, b = replicas
    wrote = await a.execute("open('notes.txt', 'w').write('buy pears')")
    handle = wrote.session
    assert handle is not None and a.shared is not None
    redis = a.shared.redis
    key = redis.key("ckpt", handle)
    blob = bytearray(redis.client.get(key))
    blob[30] ^= 0x01
    redis.client.set(key, bytes(blob))
    moved = await b.execute("import os\nprint(os.listdir('.'))", session=handle)
    restored = moved.restored
    assert restored.files == [] and "integrity check" in restored.error, restored
    assert "could not be read" in moved.hint and "start empty" in moved.hint
    assert moved.stdout == "[]\n", moved.render_text()

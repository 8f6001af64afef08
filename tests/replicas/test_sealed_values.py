"""What replicas keep in the shared store, sealed with the store's key, against a real
Redis-compatible server: unreadable there, refused when changed, moved, or read with the wrong
key, and readable across a key rotation."""

from __future__ import annotations

import os
from typing import Any

import msgpack
import pytest

from codemode.checkpoints import Checkpoint, KVCheckpoints
from codemode.errors import SharedStoreDecryptError
from codemode.privacy.vault import TokenSource
from codemode.replicas.audit import shared_digest_key
from codemode.replicas.connection import SharedRedis
from codemode.replicas.sealed_store import SealedStore
from codemode.replicas.sealing import KeySealer, PlainSealer, StoreKey, binding
from codemode.replicas.vault import SharedVault
from codemode.state.redis import RedisStore
from tests.replicas.conftest import stored_bytes

SOURCE = TokenSource("crm", "customer", "email")
EMAIL = "grace.hopper@example.com"


def sealer(*keys: StoreKey) -> KeySealer:
    return KeySealer(keys[0], keys[1:])


def new_key(origin: str) -> StoreKey:
    return StoreKey(os.urandom(32), origin)


@pytest.fixture
def k1() -> StoreKey:
    return new_key("k1")


@pytest.fixture
def k2(k1: StoreKey) -> StoreKey:
    key = new_key("k2")
    while key.key_id == k1.key_id:  # distinct ids, so "which key" is what the test checks
        key = new_key("k2")
    return key


def entries(redis: SharedRedis, session: str) -> dict[bytes, bytes]:
    found: dict[bytes, bytes] = redis.client.hgetall(redis.key("vault", session))
    return found


def test_vault_entries_are_stored_sealed_and_read_back_with_the_key(
    redis: SharedRedis, redis_server: Any, k1: StoreKey
) -> None:
    first = SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(k1))
    token = first.token_for("EMAIL", EMAIL, SOURCE)
    first.mark_delivered(token, "mail")
    stored = stored_bytes(redis_server.url)
    assert EMAIL.encode() not in stored and b"hopper" not in stored
    assert token.encode() in stored  # tokens are not secret: the hash is keyed by them
    (blob,) = entries(redis, "s_1").values()
    assert blob[0] == 0xC1 and blob[1] == k1.key_id
    again = SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(k1))
    entry = again.lookup(token)
    assert entry is not None and (entry.value, entry.delivered) == (EMAIL, {"mail"})
    # Two writes of the same entry never share a nonce.
    again.mark_delivered(token, "calendar")
    (rewritten,) = entries(redis, "s_1").values()
    assert rewritten[2:14] != blob[2:14]


def test_a_vault_read_with_another_key_or_none_is_a_clear_error(
    redis: SharedRedis, k1: StoreKey, k2: StoreKey
) -> None:
    SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(k1)).token_for("EMAIL", EMAIL, SOURCE)
    with pytest.raises(SharedStoreDecryptError, match="key this replica does not have") as wrong:
        SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(k2))
    assert "session 's_1' cannot continue" in str(wrong.value)
    assert "shared_store_old_key_files" in str(wrong.value)  # the fix names the setting
    with pytest.raises(SharedStoreDecryptError, match="this replica has no key"):
        SharedVault(redis, "s_1", ttl_s=60, sealer=PlainSealer())
    # A key with the same id but other bytes: the tag check refuses it.
    twin = StoreKey(bytes(32), "twin")
    while twin.key_id != k1.key_id:
        twin = new_key("twin")
    with pytest.raises(SharedStoreDecryptError, match="failed its integrity check"):
        SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(twin))


def test_a_changed_entry_is_refused_and_logged_never_returned(
    redis: SharedRedis, k1: StoreKey, caplog: pytest.LogCaptureFixture
) -> None:
    vault = SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(k1))
    token = vault.token_for("EMAIL", EMAIL, SOURCE)
    key = redis.key("vault", "s_1")
    blob = bytearray(redis.client.hget(key, token))
    blob[-20] ^= 0x01  # one bit of the ciphertext
    redis.client.hset(key, token, bytes(blob))
    with pytest.raises(SharedStoreDecryptError, match="failed its integrity check"):
        SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(k1))
    refused = [r for r in caplog.records if r.levelname == "ERROR" and "refused" in r.message]
    assert refused and token in refused[0].message and EMAIL not in caplog.text


def test_an_entry_moved_to_another_session_or_token_fails_its_check(
    redis: SharedRedis, k1: StoreKey
) -> None:
    vault = SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(k1))
    token = vault.token_for("EMAIL", EMAIL, SOURCE)
    other = vault.token_for("EMAIL", "someone@example.org", SOURCE)
    blob = redis.client.hget(redis.key("vault", "s_1"), token)
    # The same entry under another session's key: that session's load refuses it.
    redis.client.hset(redis.key("vault", "s_2"), token, blob)
    with pytest.raises(SharedStoreDecryptError, match="copied from another key"):
        SharedVault(redis, "s_2", ttl_s=60, sealer=sealer(k1))
    # Under another token of the same session: refused too.
    redis.client.hset(redis.key("vault", "s_1"), other, blob)
    with pytest.raises(SharedStoreDecryptError, match="failed its integrity check"):
        SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(k1))


def test_an_unencrypted_entry_is_refused_where_a_key_is_set(
    redis: SharedRedis, k1: StoreKey
) -> None:
    planted = msgpack.packb(["EMAIL", "evil@example.net", ["crm"], [], [], "<EMAIL_1>"])
    redis.client.hset(redis.key("vault", "s_1"), "<EMAIL_1>", planted)
    assert SharedVault(redis, "s_1", ttl_s=60).value_of("<EMAIL_1>") == "evil@example.net"
    with pytest.raises(SharedStoreDecryptError, match="is not encrypted"):
        SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(k1))


def test_a_rotation_reads_the_old_key_and_writes_the_new_one(
    redis: SharedRedis, k1: StoreKey, k2: StoreKey
) -> None:
    old = SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(k1))
    token = old.token_for("EMAIL", EMAIL, SOURCE)
    digest_key = shared_digest_key(redis, sealer(k1))
    rotated = sealer(k2, k1)
    moved = SharedVault(redis, "s_1", ttl_s=60, sealer=rotated)
    assert moved.value_of(token) == EMAIL
    fresh = moved.token_for("PHONE", "+1 555 0100", SOURCE)
    # Every entry is now sealed with the new key: the one written now, and the old one
    # (written again when it was loaded).
    assert {blob[1] for blob in entries(redis, "s_1").values()} == {k2.key_id}
    assert shared_digest_key(redis, rotated) == digest_key
    # Once that is done, the new key alone reads everything; the old one alone no longer does.
    alone = SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(k2))
    assert (alone.value_of(token), alone.value_of(fresh)) == (EMAIL, "+1 555 0100")
    assert shared_digest_key(redis, sealer(k2)) == digest_key
    with pytest.raises(SharedStoreDecryptError, match="key this replica does not have"):
        SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(k1))


def test_a_rotation_to_a_key_with_the_old_ones_id_writes_everything_again(
    redis: SharedRedis, k1: StoreKey
) -> None:
    """One rotation in 256 gives the new key the old one's one-byte id: the values sealed
    with the old key are still written again, or they would fail once it is retired."""
    twin = new_key("twin")
    while twin.key_id != k1.key_id:
        twin = new_key("twin")
    token = SharedVault(redis, "s_1", ttl_s=60, sealer=sealer(k1)).token_for("EMAIL", EMAIL, SOURCE)
    digest_key = shared_digest_key(redis, sealer(k1))
    rotated = sealer(twin, k1)
    assert SharedVault(redis, "s_1", ttl_s=60, sealer=rotated).value_of(token) == EMAIL
    assert shared_digest_key(redis, rotated) == digest_key
    alone = sealer(twin)
    assert SharedVault(redis, "s_1", ttl_s=60, sealer=alone).value_of(token) == EMAIL
    assert shared_digest_key(redis, alone) == digest_key
    # Sealed with the current key already: not written again.
    (blob,) = entries(redis, "s_1").values()
    assert not rotated.stale(blob, bound_to=binding(redis.key("vault", "s_1"), token))


def test_the_audit_digest_key_is_sealed_and_a_plain_one_is_replaced(
    redis: SharedRedis, redis_server: Any, k1: StoreKey
) -> None:
    plain = shared_digest_key(redis, PlainSealer())  # a store from before keys existed
    name = redis.key("audit", "key")
    assert redis.client.get(name) == plain
    sealed = shared_digest_key(redis, sealer(k1))
    assert sealed != plain and len(sealed) == 32
    assert plain not in stored_bytes(redis_server.url) and sealed not in redis.client.get(name)
    assert shared_digest_key(redis, sealer(k1)) == sealed  # every replica gets the same
    with pytest.raises(SharedStoreDecryptError, match="this replica has no key"):
        shared_digest_key(redis, PlainSealer())


def test_checkpoints_are_sealed_and_bound_to_their_session(
    redis: SharedRedis, redis_server: Any, k1: StoreKey
) -> None:
    raw = RedisStore(redis_server.url, namespace=redis.namespace)
    checkpoints = KVCheckpoints(SealedStore(raw, sealer(k1), namespace=redis.namespace))
    saved = Checkpoint("o:alice", 1.0, b"tar bytes", ("notes.txt",), {"secret": b"pickled pii"})
    checkpoints.put("h_1", saved, expires_at=9e9)
    assert b"pickled pii" not in stored_bytes(redis_server.url)
    assert checkpoints.get("h_1") == saved
    stolen = raw.get("ckpt:h_1")
    assert stolen is not None
    raw.set("ckpt:h_2", stolen.data)
    with pytest.raises(SharedStoreDecryptError, match="copied from another key"):
        checkpoints.get("h_2")
    raw.close()

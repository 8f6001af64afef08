"""Every key-value store keeps the same contract: memory, SQLite, Redis, and the tiered store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.errors import StateStoreError
from codemode.state.redis import RedisStore
from codemode.state.sqlite import SQLiteStore
from codemode.state.store import KeyValueStore, MemoryStore
from codemode.state.tiered import TieredStore

KINDS = ["memory", "sqlite", "redis", "tiered", "tiered-redis"]


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyValueStore]:
    kind = request.param
    made: KeyValueStore
    if kind == "memory":
        made = MemoryStore()
    elif kind == "sqlite":
        made = SQLiteStore(tmp_path / "kv.sqlite")
    elif kind == "redis":
        made = RedisStore(request.getfixturevalue("redis_server").url)
    elif kind == "tiered":
        made = TieredStore(MemoryStore(), SQLiteStore(tmp_path / "kv.sqlite"))
    else:
        url = request.getfixturevalue("redis_server").url
        made = TieredStore(RedisStore(url), SQLiteStore(tmp_path / "kv.sqlite"))
    yield made
    made.close()


def test_set_get_delete(store: KeyValueStore) -> None:
    assert store.get("a") is None
    store.set("a", b"1")
    found = store.get("a")
    assert found is not None and found.data == b"1" and found.expires_at is None
    store.set("a", b"two")
    assert store.get("a").data == b"two"  # type: ignore[union-attr]
    assert store.delete("a") is True
    assert store.delete("a") is False
    assert store.get("a") is None


def test_expiry(store: KeyValueStore) -> None:
    store.set("gone", b"x", expires_at=time.time() - 1)
    assert store.get("gone") is None
    store.set("kept", b"x", expires_at=time.time() + 60)
    found = store.get("kept")
    assert found is not None and found.expires_at is not None
    assert 0 < found.expires_at - time.time() <= 61


def test_incr_counts_from_zero_and_keeps_the_ttl(store: KeyValueStore) -> None:
    assert store.incr("n") == 1
    assert store.incr("n", 5) == 6
    store.set("t", b"10", expires_at=time.time() + 60)
    assert store.incr("t") == 11
    assert store.get("t").expires_at is not None  # type: ignore[union-attr]


def test_delete_prefix_touches_only_the_prefix(store: KeyValueStore) -> None:
    for key in ("s:1:a", "s:1:b", "s:10:a", "s:2:a", "s:1%_x"):
        store.set(key, b"v")
    assert store.delete_prefix("s:1:") == 2
    assert store.get("s:10:a") is not None and store.get("s:2:a") is not None
    assert store.get("s:1%_x") is not None


def test_the_durable_tier_serves_after_a_restart(tmp_path: Path) -> None:
    first = TieredStore(MemoryStore(), SQLiteStore(tmp_path / "kv.sqlite"))
    first.set("k", b"v")
    first.incr("n", 3)
    first.close()
    second = TieredStore(MemoryStore(), SQLiteStore(tmp_path / "kv.sqlite"))
    assert second.get("k").data == b"v"  # type: ignore[union-attr]
    assert second.incr("n") == 4  # counts on from the durable value, not from zero
    second.close()


def test_a_redis_that_goes_away_fails_clearly_and_loses_nothing_acknowledged(
    redis_server, tmp_path: Path
) -> None:
    durable_path = tmp_path / "kv.sqlite"
    store = TieredStore(RedisStore(redis_server.url), SQLiteStore(durable_path))
    for index in range(50):
        store.set(f"k{index}", str(index).encode())
    redis_server.stop()
    with pytest.raises(StateStoreError, match="did not answer") as caught:
        store.set("late", b"x")
    assert "redis" in caught.value.message.lower() and caught.value.fix
    store.close()
    durable = SQLiteStore(durable_path)
    assert [durable.get(f"k{i}").data for i in range(50)] == [  # type: ignore[union-attr]
        str(i).encode() for i in range(50)
    ]
    durable.close()


def test_an_unreachable_redis_is_a_clear_error_at_open() -> None:
    with pytest.raises(StateStoreError, match=r"127\.0\.0\.1:1"):
        RedisStore("redis://127.0.0.1:1/0", timeout_s=0.5)

"""Owners never share a store key, and kv has quotas per session and per owner (bytes and
keys), with a clear error in the code: over every store the state can use, and end to end."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.engine import Codemode
from codemode.errors import ToolError
from codemode.sandbox import Limits, SandboxSettings
from codemode.settings.state import StateSettings
from codemode.state.quota import KvQuota
from codemode.state.sqlite import SQLiteStore
from codemode.state.store import KeyValueStore, MemoryStore
from codemode.state.tiered import TieredStore
from codemode.state.tools import StateTools
from codemode.tools import ToolCall


def call(tools: StateTools, operation: str, **arguments: object) -> object:
    return tools.invoke(ToolCall("_state", operation, arguments), timeout_s=5)


@pytest.fixture(params=["memory", "sqlite", "tiered", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> KeyValueStore:
    if request.param == "memory":
        return MemoryStore()
    if request.param == "redis":
        from codemode.state.redis import RedisStore

        return RedisStore(request.getfixturevalue("redis_server").url)
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "state.sqlite")
    return TieredStore(MemoryStore(), SQLiteStore(tmp_path / "state.sqlite"))


def test_owners_sharing_a_name_prefix_do_not_share_keys(store):
    team = StateTools(store, session="s1", owner="team")
    ops = StateTools(store, session="s2", owner="team:ops")
    call(team, "set", scope="owner", key="ops:token", value="team's")
    call(ops, "set", scope="owner", key="token", value="ops'")
    assert call(team, "get", scope="owner", key="ops:token") == {"found": True, "value": "team's"}
    assert call(ops, "get", scope="owner", key="token") == {"found": True, "value": "ops'"}
    assert call(ops, "get", scope="owner", key="ops:token") == {"found": False}


def test_an_owner_without_colons_keeps_the_keys_it_had(store):
    store.set("o:alice:cursor", b"3")  # written before owner names were escaped
    alice = StateTools(store, session="s1", owner="alice")
    assert call(alice, "get", scope="owner", key="cursor") == {"found": True, "value": 3}


def test_the_owner_byte_quota_stops_writes_with_a_clear_error(store):
    quota = KvQuota(owner_max_bytes=10_000)
    tools = StateTools(store, session="s1", owner="alice", quota=quota)
    value = "x" * 3_000
    for index in range(3):
        call(tools, "set", scope="owner", key=f"k{index}", value=value)
    with pytest.raises(ToolError, match=r"over its quota of 10,000 \(\[state\] owner_max_bytes\)"):
        call(tools, "set", scope="owner", key="k3", value=value)
    # Another session of the same owner is under the same quota.
    other = StateTools(store, session="s2", owner="alice", quota=quota)
    with pytest.raises(ToolError, match="owner_max_bytes"):
        call(other, "set", scope="owner", key="k4", value=value)
    # Deleting frees room; overwriting a key with a smaller value is always allowed.
    call(tools, "delete", scope="owner", key="k0")
    call(tools, "set", scope="owner", key="k3", value=value)
    call(tools, "set", scope="owner", key="k3", value="small")


def test_the_session_key_quota_counts_keys_and_incr(store):
    tools = StateTools(store, session="s1", owner="alice", quota=KvQuota(session_max_keys=3))
    call(tools, "set", key="a", value=1)
    call(tools, "incr", key="b")
    call(tools, "set", key="a", value=2)  # an overwrite is not a new key
    call(tools, "set", key="c", value=3)
    with pytest.raises(ToolError, match=r"already keeps 3 keys.*session_max_keys") as caught:
        call(tools, "incr", key="d")
    assert "kv.delete" in (caught.value.fix or "")
    # The owner's scope has its own quota.
    call(tools, "set", scope="owner", key="d", value=4)


def test_expired_values_do_not_count_against_the_quota(store):
    quota = KvQuota(owner_max_keys=2)
    tools = StateTools(store, session="s1", owner="alice", quota=quota)
    call(tools, "set", scope="owner", key="a", value=1, ttl=0.001)
    call(tools, "set", scope="owner", key="b", value=2, ttl=0.001)
    deadline = time.monotonic() + 10
    while store.get("o:alice:a") is not None or store.get("o:alice:b") is not None:
        assert time.monotonic() < deadline
    call(tools, "set", scope="owner", key="c", value=3)  # the counters said 2: recounted


def test_a_runaway_execution_is_stopped_at_the_quota_in_the_sandbox(tmp_path):
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=30), pool_size=1),
        gateway=GatewaySettings(state_dir=tmp_path / "state"),
        state=StateSettings(session_max_bytes=2_000_000),
    )
    code = "from state import kv\nfor i in range(1000):\n    kv.set(f'chunk{i}', 'x' * 500_000)\n"

    async def main() -> None:
        async with Codemode(config, catalog=Catalog([]), semantic=False, audit=False) as engine:
            result = await engine.execute(code)
        assert result.status == "error", result.render_text()
        assert "session_max_bytes" in result.render_text()

    import anyio

    anyio.run(main)
    # Four chunks fit under 2 MB, the fifth was refused: not 500 MB on the host's disk.
    written = sum(path.stat().st_size for path in (tmp_path / "state").glob("state.sqlite*"))
    assert written < 8_000_000


def test_closing_a_session_frees_its_quota_counters_too(tmp_path):
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=30), pool_size=1),
        gateway=GatewaySettings(state_dir=tmp_path / "state"),
    )

    async def main() -> None:
        async with Codemode(config, catalog=Catalog([]), semantic=False, audit=False) as engine:
            result = await engine.execute("from state import kv\nkv.set('a', 1)")
            assert result.status == "ok", result.render_text()
            store = engine.state_store
            assert store is not None
            counter = f"q:s:{result.session}:keys"
            assert store.get(counter) is not None
            await engine.close_session(result.session)
            assert store.get(counter) is None and store.get(f"s:{result.session}:a") is None

    import anyio

    anyio.run(main)

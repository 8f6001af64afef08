"""The fix memory in the state store: shared by replicas that share the store's short tier,
out of reach of guest code, kept across restarts, and older ``fixes.sqlite`` files moved in."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from codemode.memory import KVFixes, open_fixes
from codemode.memory.kv import FIX_PREFIX
from codemode.state.sqlite import SQLiteStore
from codemode.state.store import MemoryStore
from codemode.state.tiered import TieredStore
from codemode.state.tools import StateTools
from codemode.tools import ToolCall

# The file older versions kept beside the state database, with their own CREATE statement.
LEGACY_SCHEMA = """
CREATE TABLE IF NOT EXISTS fixes (
    owner TEXT NOT NULL,
    signature TEXT NOT NULL,
    diff TEXT NOT NULL,
    recorded REAL NOT NULL,
    seen REAL NOT NULL,
    uses INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (owner, signature)
);
"""


def test_replicas_sharing_the_short_tier_share_their_fixes(tmp_path: Path) -> None:
    shared = MemoryStore()  # stands in for the Redis both replicas use
    one = TieredStore(shared, SQLiteStore(tmp_path / "one.sqlite"))
    two = TieredStore(shared, SQLiteStore(tmp_path / "two.sqlite"))
    KVFixes(one).remember("alice", "KeyError | crm.get", "-a\n+b")
    recalled = KVFixes(two).recall("alice", "KeyError | crm.get")
    assert recalled is not None and (recalled.diff, recalled.uses) == ("-a\n+b", 1)
    assert [fix.uses for fix in KVFixes(one).entries("alice")] == [1]
    one.close()
    two.close()


def test_fixes_outlive_a_restart_in_their_order(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = TieredStore(MemoryStore(), SQLiteStore(path))
    memory = KVFixes(store)
    for signature in ("one", "two", "three"):
        memory.remember("bob", signature, f"diff {signature}")
    memory.recall("bob", "one")  # now the most recently seen
    store.close()
    store = TieredStore(MemoryStore(), SQLiteStore(path))
    memory = KVFixes(store)
    assert [fix.signature for fix in memory.entries("bob")] == ["two", "three", "one"]
    assert memory.forget("bob") == 3  # counted although the short tier was empty
    assert memory.entries("bob") == []
    store.close()


def test_owners_and_signatures_never_share_a_key() -> None:
    memory = KVFixes(MemoryStore())
    memory.remember("team", "ops:x", "theirs")
    memory.remember("team:ops", "x", "others")
    assert [fix.diff for fix in memory.entries("team")] == ["theirs"]
    assert memory.forget("team") == 1
    [left] = memory.entries("team:ops")
    assert left.diff == "others"


@pytest.mark.parametrize("owner", ["-", "fix", "alice", "fix:-"])
def test_guest_code_cannot_read_or_write_the_fix_memory(owner: str) -> None:
    store = MemoryStore()
    memory = KVFixes(store)
    memory.remember(owner, "sig", "the fix")
    fix_keys = {key for key in store._values if key.startswith(FIX_PREFIX)}
    tools = StateTools(store, session="fix", owner=owner)
    for scope in ("session", "owner"):
        for key in ("sig", f"fix:{owner}", f"fix:{owner}:sig", f"{owner}:sig", "../fix"):
            call = ToolCall("_state", "get", {"key": key, "scope": scope})
            assert tools.invoke(call, timeout_s=1) == {"found": False}
            tools.invoke(
                ToolCall("_state", "set", {"key": key, "scope": scope, "value": 1}), timeout_s=1
            )
    guest_keys = set(store._values) - fix_keys
    assert guest_keys and not any(key.startswith(FIX_PREFIX) for key in guest_keys)
    [kept] = memory.entries(owner)
    assert (kept.diff, kept.uses) == ("the fix", 0)


def legacy_file(state_dir: Path, rows: list[tuple[str, str, str, float, float, int]]) -> Path:
    state_dir.mkdir(exist_ok=True)
    path = state_dir / "fixes.sqlite"
    database = sqlite3.connect(path)
    database.execute("PRAGMA journal_mode=WAL")
    database.executescript(LEGACY_SCHEMA)
    database.executemany("INSERT INTO fixes VALUES (?, ?, ?, ?, ?, ?)", rows)
    database.commit()
    database.close()
    return path


def test_an_older_fix_memory_file_is_moved_into_the_state_store_once(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    path = legacy_file(
        state_dir,
        [
            ("alice", "later", "-b\n+c", 20.0, 30.0, 0),
            ("alice", "sig", "-a\n+b", 10.0, 25.0, 4),
            ("bob", "known", "old", 5.0, 5.0, 1),
        ],
    )
    store = SQLiteStore(state_dir / "state.sqlite")
    KVFixes(store).remember("bob", "known", "newer")
    memory = open_fixes(store, state_dir)
    alice = memory.entries("alice")
    assert [(f.signature, f.diff, f.recorded, f.uses) for f in alice] == [
        ("sig", "-a\n+b", 10.0, 4),
        ("later", "-b\n+c", 20.0, 0),
    ]
    [bob] = memory.entries("bob")
    assert bob.diff == "newer"  # the state store's own fix wins
    assert not path.exists() and (state_dir / "fixes.sqlite.imported").exists()
    memory.forget("alice")
    assert open_fixes(store, state_dir).entries("alice") == []  # not imported again
    store.close()


def test_an_unreadable_older_file_is_left_in_place(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "fixes.sqlite").write_bytes(b"not a database" * 100)
    memory = open_fixes(MemoryStore(), state_dir)
    assert memory.entries("-") == []
    assert (state_dir / "fixes.sqlite").exists()

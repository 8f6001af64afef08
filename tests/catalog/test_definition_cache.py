"""Definition cache: SQLite and in-memory twins behave alike; corrupt files are rebuilt."""

from __future__ import annotations

import pytest

from codemode.catalog.cache import MemoryDefinitionCache, SQLiteDefinitionCache
from codemode.tools import ToolSpec

SPECS = [
    ToolSpec(server="s", name="a", description="first", read_only=True),
    ToolSpec(
        server="s",
        name="b",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
        output_schema={"type": "object"},
        source="openapi",
        method="GET",
        path="/b",
        operation_id="getB",
    ),
]


@pytest.fixture(params=["sqlite", "memory"])
def cache(request, tmp_path):
    if request.param == "memory":
        yield MemoryDefinitionCache()
    else:
        db = SQLiteDefinitionCache(tmp_path / "defs.sqlite")
        yield db
        db.close()


def test_round_trip_keyed_by_fingerprint(cache):
    assert cache.get("s", "f1") is None
    cache.put("s", "f1", SPECS)
    assert cache.get("s", "f1") == SPECS
    assert cache.get("s", "f2") is None
    cache.put("s", "f2", SPECS[:1])
    assert cache.get("s", "f2") == SPECS[:1]
    cache.invalidate("s")
    assert cache.get("s", "f2") is None


def test_survives_reopen(tmp_path):
    first = SQLiteDefinitionCache(tmp_path / "defs.sqlite")
    first.put("s", "f", SPECS)
    first.close()
    second = SQLiteDefinitionCache(tmp_path / "defs.sqlite")
    assert second.get("s", "f") == SPECS
    second.close()


def test_corrupt_file_is_moved_aside_and_rebuilt(tmp_path):
    path = tmp_path / "state" / "defs.sqlite"
    path.parent.mkdir()
    path.write_bytes(b"this is not a database" * 100)
    cache = SQLiteDefinitionCache(path)
    assert cache.get("s", "f") is None
    cache.put("s", "f", SPECS)
    assert cache.get("s", "f") == SPECS
    cache.close()
    assert [p.name for p in path.parent.iterdir() if ".corrupt-" in p.name]


def test_file_corrupted_while_open_is_recovered(tmp_path):
    path = tmp_path / "defs.sqlite"
    cache = SQLiteDefinitionCache(path)
    cache.put("s", "f", SPECS)
    path.write_bytes(b"garbage" * 1000)
    assert cache.get("s", "f") is None  # recovered, not raised
    cache.put("s", "f", SPECS)
    assert cache.get("s", "f") == SPECS
    cache.close()

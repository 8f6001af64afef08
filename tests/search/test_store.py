"""Stored indexes: one per catalog fingerprint, read back as the same search, misses are misses."""

import dataclasses
import json

import pytest

from codemode.search.fts import FtsIndex
from codemode.search.semantic import HybridIndex, build_index, open_stored_index
from codemode.search.store import INDEX_FORMAT, IndexStore, catalog_fingerprint

QUERIES = ("refund a charge", "delete a customer", "list invoices", "create customer email")


def test_fingerprint_follows_what_search_reads(tiny_specs):
    base = catalog_fingerprint(tiny_specs)
    assert base == catalog_fingerprint(list(tiny_specs))
    changed = [dataclasses.replace(tiny_specs[0], description="something else"), *tiny_specs[1:]]
    assert catalog_fingerprint(changed) != base
    assert catalog_fingerprint(tiny_specs[:-1]) != base


def test_lexical_index_round_trips(tiny_specs, cache_in_tmp):
    built = build_index(tiny_specs, semantic=False)
    stored = open_stored_index(catalog_fingerprint(tiny_specs), semantic=False)
    assert isinstance(stored, FtsIndex)
    assert len(stored) == len(built)
    for query in QUERIES:
        assert stored.search(query, 5) == built.search(query, 5)
    assert (cache_in_tmp / "search" / catalog_fingerprint(tiny_specs) / "lexical.sqlite").is_file()


def test_lexical_store_is_no_semantic_index(tiny_specs):
    build_index(tiny_specs, semantic=False)
    assert open_stored_index(catalog_fingerprint(tiny_specs), semantic=True) is None


@pytest.mark.needs_model
def test_hybrid_index_round_trips_and_loads_without_embedding(tiny_specs, monkeypatch):
    built = build_index(tiny_specs, semantic=True)
    assert isinstance(built, HybridIndex)
    stored = build_index(tiny_specs, semantic=True)  # from the store this time
    assert isinstance(stored, HybridIndex)
    assert stored is not built
    assert stored.documents == []  # nothing was rebuilt from the tools
    for query in QUERIES:
        assert [h.tool for h in stored.search(query, 5)] == [h.tool for h in built.search(query, 5)]


def test_a_damaged_or_foreign_entry_is_a_miss(tiny_specs, cache_in_tmp):
    build_index(tiny_specs, semantic=False)
    fingerprint = catalog_fingerprint(tiny_specs)
    tools = cache_in_tmp / "search" / fingerprint / "tools.json"
    tools.write_text("{not json")
    assert open_stored_index(fingerprint, semantic=False) is None
    tools.write_text(json.dumps({"format": INDEX_FORMAT + 1, "tools": []}))
    assert open_stored_index(fingerprint, semantic=False) is None
    # ... and the next build writes a good one again.
    build_index(tiny_specs, semantic=False)
    assert open_stored_index(fingerprint, semantic=False) is not None


def test_inputs_are_forgotten_when_a_watched_file_changes(tmp_path):
    store = IndexStore(tmp_path)
    spec = tmp_path / "spec.json"
    spec.write_text("{}")
    store.remember_inputs("k1", "fp1", [spec])
    assert store.lookup_inputs("k1") == "fp1"
    assert store.lookup_inputs("k2") is None
    spec.write_text('{"changed": true}')
    assert store.lookup_inputs("k1") is None
    store.remember_inputs("k1", "fp2", [spec])
    assert store.lookup_inputs("k1") == "fp2"
    spec.unlink()
    assert store.lookup_inputs("k1") is None


def test_an_unwritable_cache_only_warns(tiny_specs, tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("CODEMODE_CACHE_DIR", str(blocker))
    index = build_index(tiny_specs, semantic=False)
    assert index.search("refund a charge", 1)[0].tool == "refundCharge"
    assert any("could not store" in r.getMessage() for r in caplog.records)


def test_fingerprint_does_not_depend_on_shared_objects(tiny_specs):
    """The same tools hash the same whether their schemas share sub-objects or not, and however
    many references to them exist (a spec's resolved $refs are shared; building the index adds
    references): else each process computed another fingerprint and never found the store."""
    part = {"type": "string", "description": "an id"}
    shared = {"type": "object", "properties": {"a": part, "b": part}}
    copied = {"type": "object", "properties": {"a": dict(part), "b": dict(part)}}
    first = [dataclasses.replace(tiny_specs[0], input_schema=shared)]
    second = [dataclasses.replace(tiny_specs[0], input_schema=copied)]
    before = catalog_fingerprint(first)
    extra_references = [part] * 10
    assert catalog_fingerprint(first) == before == catalog_fingerprint(second)
    assert extra_references

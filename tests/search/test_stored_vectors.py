"""A stored index opens without numpy: its vectors and the model's matrices are mapped by the
first search that needs them, which answers as an index opened whole does."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codemode.search.semantic import HybridIndex, build_index
from codemode.search.store import IndexStore, catalog_fingerprint
from codemode.search.stored_vectors import npy_header, stored_vectors

QUERIES = ("refund a charge", "delete a customer", "list invoices", "create customer email")

# A new interpreter (numpy is loaded in this one) opens the index the test stored, says what it
# had imported, then searches.
_OPEN_AND_SEARCH = textwrap.dedent(
    """
    import json, sys
    from codemode.connectors.openapi import load_spec, operations_to_specs
    from codemode.search.semantic import HybridIndex, build_index

    specs = operations_to_specs("shop", load_spec(sys.argv[1]))
    index = build_index(specs, semantic=True)
    opened = {"hybrid": isinstance(index, HybridIndex), "numpy": "numpy" in sys.modules}
    hits = {q: [h.tool for h in index.search(q, 5)] for q in json.loads(sys.argv[2])}
    print(json.dumps({"opened": opened, "hits": hits, "numpy_after": "numpy" in sys.modules}))
    """
)


@pytest.mark.needs_model
def test_a_stored_index_opens_without_numpy_and_its_first_search_answers_as_before(
    tiny_specs, tiny_spec_file
):
    built = build_index(tiny_specs, semantic=True)
    assert isinstance(built, HybridIndex)
    expected = {query: [h.tool for h in built.search(query, 5)] for query in QUERIES}
    src = str(Path(__file__).resolve().parents[2] / "src")
    path = os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", _OPEN_AND_SEARCH, str(tiny_spec_file), json.dumps(QUERIES)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["opened"] == {"hybrid": True, "numpy": False}
    assert report["hits"] == expected
    assert report["numpy_after"]  # the search mapped the vectors


@pytest.mark.needs_model
def test_vectors_gone_before_the_first_search_rank_by_words_and_say_so(
    tiny_specs, cache_in_tmp, caplog
):
    build_index(tiny_specs, semantic=True)
    opened = build_index(tiny_specs, semantic=True)  # from the store
    assert isinstance(opened, HybridIndex)
    lexical = opened.lexical.search("refund a charge", 3)
    for path in (cache_in_tmp / "search").rglob("vectors-*.npy"):
        path.write_bytes(b"not an array any more")
    with caplog.at_level(logging.WARNING, logger="codemode.search"):
        hits = opened.search("refund a charge", 3)
    # The words' best answer leads; the tools they do not name follow at no score.
    assert [h.tool for h in hits[: len(lexical)]] == [h.tool for h in lexical] == ["refundCharge"]
    assert "rank by words alone" in caplog.text and "could not be read" in caplog.text


def test_the_header_alone_tells_a_stored_array_that_fits_from_one_that_does_not(tmp_path, np):
    store = IndexStore(tmp_path)
    vectors = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert store.save_vectors("f", "k", vectors)
    path = store.vectors_path("f", "k")
    assert npy_header(path) == {"descr": "<f4", "fortran_order": False, "shape": (3, 4)}
    found = stored_vectors(path, 3)
    assert found is not None and (found.rows, found.columns) == (3, 4)
    assert np.array_equal(found.load(), vectors)
    assert stored_vectors(path, 2) is None  # another catalog's rows
    for other in (vectors.astype(np.float64), np.asfortranarray(np.ones((3, 4), np.float32))):
        np.save(tmp_path / "other.npy", other, allow_pickle=False)
        assert stored_vectors(tmp_path / "other.npy", 3) is None
    for damaged in (b"", b"\x93NUMPY\x01\x00", b"\x93NUMPY\x01\x00\x10\x00{'descr': ", b"junk" * 9):
        (tmp_path / "bad.npy").write_bytes(damaged)
        assert npy_header(tmp_path / "bad.npy") is None
        assert stored_vectors(tmp_path / "bad.npy", 3) is None
    assert stored_vectors(tmp_path / "missing.npy", 3) is None


def test_the_fingerprints_vectors_are_checked_before_a_search_needs_them(tiny_specs, np):
    store = IndexStore()
    fingerprint = catalog_fingerprint(tiny_specs)
    store.save_vectors(fingerprint, "k", np.zeros((len(tiny_specs) + 1, 4), np.float32))
    assert store.load_vectors(fingerprint, "k", len(tiny_specs)) is None
    store.save_vectors(fingerprint, "k", np.zeros((len(tiny_specs), 4), np.float32))
    loaded = store.load_vectors(fingerprint, "k", len(tiny_specs))
    assert loaded is not None and loaded.load().shape == (len(tiny_specs), 4)

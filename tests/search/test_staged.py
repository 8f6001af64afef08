"""A first index in two stages: semantic answers from the prose view as soon as it is embedded,
then the names view beside it, the whole index stored; a build stopped between the stages
leaves the first stage stored, and the next start completes it without embedding it again."""

import threading

import pytest

from codemode.search import semantic
from codemode.search.documents import tool_documents
from codemode.search.encoder import MiniLMEncoder
from codemode.search.fts import FtsIndex
from codemode.search.live import LiveIndex, SearchStatus
from codemode.search.progress import overall_percent
from codemode.search.semantic import (
    HybridIndex,
    build_index,
    build_stages,
    model_key,
    open_stored_index,
    vectors_key,
)
from codemode.search.store import IndexStore, catalog_fingerprint

pytestmark = pytest.mark.needs_model

QUERIES = ("give a customer their money back", "list customers", "money")


class NamesGate:
    """A progress listener that holds the build at the second stage's first report."""

    def __init__(self):
        self.reports = []
        self.reached = threading.Event()
        self.release = threading.Event()

    def __call__(self, stage, percent):
        self.reports.append((stage, percent))
        if stage == "names" and not self.reached.is_set():
            self.reached.set()
            assert self.release.wait(60), "test never released the build"


@pytest.fixture
def embedded(monkeypatch):
    """Every document text the encoder embeds in the index's own thread or, with ``main``, in
    the test's thread."""
    texts: dict[bool, list[str]] = {True: [], False: []}
    encode = MiniLMEncoder.encode_documents

    def recording(self, batch, **kwargs):
        main = threading.current_thread() is threading.main_thread()
        texts[main].extend(batch)
        return encode(self, batch, **kwargs)

    monkeypatch.setattr(MiniLMEncoder, "encode_documents", recording)
    return texts


def _direct(specs, views):
    """The index made in one go with ``views`` from the embeddings the build cached (the
    encoder's last bits vary between sessions, so the same vectors means the same embeddings
    averaged the same way)."""
    index = HybridIndex(views=views)
    index.add(specs)
    return index


def _answers(index, limit=5):
    return {
        query: [(hit.tool, round(hit.score, 6)) for hit in index.search(query, limit)]
        for query in QUERIES
    }


def _stored(specs, views, np):
    encoder = HybridIndex().encoder  # the default encoder a build embeds with
    store = IndexStore()
    path = store.vectors_path(catalog_fingerprint(specs), vectors_key(model_key(encoder), views))
    return np.load(path) if path.is_file() else None


def test_answers_from_the_prose_view_then_from_both(tiny_specs, embedded, np):
    assert semantic.DEFAULT_VIEWS == (0, 1) and semantic.FIRST_VIEWS == (1,)
    gate = NamesGate()
    index = LiveIndex(tiny_specs, progress=gate).start()
    assert gate.reached.wait(60)
    during = index.answer("give a customer their money back", 5)
    assert during.status == SearchStatus("prose", during.status.percent)
    assert "descriptions only" in during.status.note
    prose = _direct(tiny_specs, (1,))
    assert index._hybrid.views == (1,)
    assert np.array_equal(index._hybrid.vectors, prose.vectors)
    assert _answers(index) == _answers(prose)
    # The first stage is stored alone while the second runs.
    assert np.array_equal(_stored(tiny_specs, (1,), np), prose.vectors)
    assert _stored(tiny_specs, (0, 1), np) is None

    gate.release.set()
    assert index.wait(60)
    after = index.answer("give a customer their money back", 5)
    assert after.status == SearchStatus("hybrid") and after.status.note is None
    both = _direct(tiny_specs, (0, 1))
    assert np.array_equal(index._hybrid.vectors, both.vectors)
    assert _answers(index) == _answers(both) != _answers(prose)
    stages = [stage for stage, _ in gate.reports]
    assert stages.index("lexical") < stages.index("embedding") < stages.index("names")
    assert stages[-1] == "ready"
    # One scale over both stages, which the overall percentage follows.
    vectors = [(stage, p) for stage, p in gate.reports if stage in ("embedding", "names")]
    percents = [p for _, p in vectors]
    assert percents == sorted(percents)
    first = vectors[: [stage for stage, _ in vectors].index("names")]
    assert 0 < first[-1][1] < 100  # the prose view's share of the work
    assert vectors[-2:] == [("names", 100.0), ("embedding", 100.0)]
    overall = [overall_percent(stage, p) for stage, p in gate.reports]
    assert overall == sorted(overall)
    # Each view embedded once: the second stage read the prose view back from the cache.
    documents = tool_documents(tiny_specs)
    texts = sorted(d.semantic_texts[v] for d in documents for v in (0, 1))
    assert sorted(embedded[False]) == texts


def test_the_stored_index_after_both_stages_holds_both_views(tiny_specs, np):
    index = LiveIndex(tiny_specs).start()
    assert index.wait(60) and index.status.mode == "hybrid"
    both = _direct(tiny_specs, (0, 1))
    assert np.array_equal(_stored(tiny_specs, (0, 1), np), both.vectors)
    assert _stored(tiny_specs, (1,), np) is None  # the first stage's file is replaced
    fingerprint = catalog_fingerprint(tiny_specs)
    stored = open_stored_index(fingerprint, semantic=True)
    assert isinstance(stored, HybridIndex) and stored.views == (0, 1)
    assert _answers(stored) == _answers(index) == _answers(both)


class Stopped(Exception):
    pass


def _stop_at_names(stage, percent):
    if stage == "names":
        raise Stopped("the process stopped between the stages")


def _first_stage_only(specs):
    documents = tool_documents(specs)
    lexical = FtsIndex()
    lexical.add_documents(documents)
    with pytest.raises(Stopped):
        build_stages(
            documents, lexical, fingerprint=catalog_fingerprint(specs), progress=_stop_at_names
        )


def test_a_build_stopped_between_the_stages_leaves_the_first_stored(tiny_specs, embedded, np):
    _first_stage_only(tiny_specs)
    fingerprint = catalog_fingerprint(tiny_specs)
    directory = IndexStore().directory(fingerprint)
    assert not list(directory.glob("*.tmp"))
    assert open_stored_index(fingerprint, semantic=True) is None  # not read as the whole index
    first = open_stored_index(fingerprint, semantic=True, partial=True)
    prose = _direct(tiny_specs, (1,))
    assert isinstance(first, HybridIndex) and first.views == (1,)
    assert np.array_equal(first.vectors, prose.vectors)
    assert _answers(first) == _answers(prose)

    # The next start answers from it at once and completes the second stage, embedding only
    # the names view.
    gate = NamesGate()
    index = LiveIndex(tiny_specs, progress=gate).start()
    assert index.status.mode == "prose"
    assert _answers(index) == _answers(prose)
    assert gate.reached.wait(60)
    gate.release.set()
    assert index.wait(60) and index.status == SearchStatus("hybrid")
    documents = tool_documents(tiny_specs)
    assert sorted(embedded[False]) == sorted(d.semantic_texts[0] for d in documents)
    both = _direct(tiny_specs, (0, 1))
    assert _answers(index) == _answers(both)
    assert np.array_equal(_stored(tiny_specs, (0, 1), np), both.vectors)


def test_build_index_completes_a_stopped_build(tiny_specs, embedded, np):
    _first_stage_only(tiny_specs)
    embedded[True].clear()
    index = build_index(tiny_specs, semantic=True)
    documents = tool_documents(tiny_specs)
    assert sorted(embedded[True]) == sorted(d.semantic_texts[0] for d in documents)
    assert isinstance(index, HybridIndex) and index.views == (0, 1)
    assert np.array_equal(index.vectors, _direct(tiny_specs, (0, 1)).vectors)


def test_a_failed_second_stage_keeps_the_first(tiny_specs, monkeypatch):
    _first_stage_only(tiny_specs)

    def broken(self, batch, **kwargs):
        raise RuntimeError("no memory for the names view")

    monkeypatch.setattr(MiniLMEncoder, "encode_documents", broken)
    index = LiveIndex(tiny_specs).start()
    assert index.wait(60)
    answer = index.answer("give a customer their money back", 1)
    assert answer.status.mode == "prose"
    assert "no memory for the names view" in answer.status.note
    assert answer.hits[0].tool == "refundCharge"


def test_views_stay_configurable(tiny_specs, embedded, np):
    index = LiveIndex(tiny_specs, views=(1,)).start()
    assert index.wait(60) and index.status == SearchStatus("hybrid")
    documents = tool_documents(tiny_specs)
    assert sorted(embedded[False]) == sorted(d.semantic_texts[1] for d in documents)
    assert np.array_equal(_stored(tiny_specs, (1,), np), _direct(tiny_specs, (1,)).vectors)
    assert _stored(tiny_specs, (0, 1), np) is None


def test_embeddings_that_cannot_be_cached_are_kept_for_the_next_stage(tmp_path, np):
    from codemode.search.embedding_cache import EmbeddingCache

    (tmp_path / "embeddings").write_text("a file where the cache's directory would be")
    cache = EmbeddingCache(tmp_path, "model")
    vectors = np.ones((2, 3), dtype=np.float32)
    cache.store(["a", "b"], vectors)
    assert np.array_equal(cache.load(["a", "b"]), vectors)
    assert cache.load(["a"]) is None
    assert EmbeddingCache(tmp_path, "model").load(["a", "b"]) is None  # not on disk


def test_whole_vectors_that_cannot_be_stored_keep_the_first_stage(tiny_specs, np, monkeypatch):
    import contextlib

    from codemode.search import store

    real_open = store.private_open

    @contextlib.contextmanager
    def disk_full_for_both_views(path, *args, **kwargs):
        with real_open(path, *args, **kwargs) as handle:
            if "view0+1" not in path.name:
                yield handle
                return

            class Full:
                def write(self, data):
                    handle.write(bytes(data)[:10])
                    raise OSError(28, "No space left on device")

            yield Full()

    monkeypatch.setattr(store, "private_open", disk_full_for_both_views)
    index = LiveIndex(tiny_specs).start()
    assert index.wait(60) and index.status == SearchStatus("hybrid")  # in memory all the same
    fingerprint = catalog_fingerprint(tiny_specs)
    assert not list(IndexStore().directory(fingerprint).glob("*.tmp"))
    assert _stored(tiny_specs, (0, 1), np) is None
    first = open_stored_index(fingerprint, semantic=True, partial=True)
    assert isinstance(first, HybridIndex) and first.views == (1,)
    assert np.array_equal(first.vectors, _direct(tiny_specs, (1,)).vectors)


CHILD = """
import sys
from codemode.connectors.openapi import load_spec, operations_to_specs
from codemode.search.live import LiveIndex

def progress(stage, percent):
    if stage == "names":
        print("names", flush=True)
        sys.stdin.readline()  # held in the second stage until the test kills the process

specs = operations_to_specs("shop", load_spec(sys.argv[1]))
LiveIndex(specs, progress=progress).start().wait()
"""


def test_a_process_killed_in_the_second_stage_leaves_the_first_stored(
    tiny_spec_file, tiny_specs, np
):
    import os
    import selectors
    import signal
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tiny_spec_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(child.stdout, selectors.EVENT_READ)
            assert selector.select(timeout=120), "the child never reached the second stage"
        assert child.stdout.readline().strip() == "names"
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate()
    fingerprint = catalog_fingerprint(tiny_specs)
    assert not list(IndexStore().directory(fingerprint).glob("*.tmp"))
    assert open_stored_index(fingerprint, semantic=True) is None
    first = open_stored_index(fingerprint, semantic=True, partial=True)
    assert isinstance(first, HybridIndex) and first.views == (1,)
    assert _answers(first) == _answers(_direct(tiny_specs, (1,)))
    gate = NamesGate()
    index = LiveIndex(tiny_specs, progress=gate).start()
    assert index.status.mode == "prose"
    assert gate.reached.wait(60)
    gate.release.set()
    assert index.wait(60) and index.status == SearchStatus("hybrid")
    assert np.array_equal(_stored(tiny_specs, (0, 1), np), _direct(tiny_specs, (0, 1)).vectors)

"""A search during the index build answers lexically at once and says so; then it is hybrid."""

import threading

import pytest

from codemode.search.live import LiveIndex, SearchStatus
from codemode.search.semantic import HybridIndex, open_stored_index
from codemode.search.store import catalog_fingerprint


class Gate:
    """A progress listener that holds the build at its first embedding report."""

    def __init__(self):
        self.reports = []
        self.reached = threading.Event()
        self.release = threading.Event()

    def __call__(self, stage, percent):
        self.reports.append((stage, percent))
        if stage == "embedding" and not self.reached.is_set():
            self.reached.set()
            assert self.release.wait(60), "test never released the build"


@pytest.mark.needs_model
def test_answers_lexically_while_building_then_hybrid(tiny_specs):
    gate = Gate()
    index = LiveIndex(tiny_specs, progress=gate).start()
    assert gate.reached.wait(60)
    during = index.answer("refund a charge", 2)
    assert during.status.mode == "building"
    assert "lexical" in during.status.note
    assert during.hits[0].tool == "refundCharge"
    assert not index.wait(0)
    gate.release.set()
    assert index.wait(60)
    after = index.answer("give a customer their money back", 2)
    assert after.status == SearchStatus("hybrid")
    assert after.status.note is None
    assert after.hits[0].tool == "refundCharge"
    stages = [stage for stage, _ in gate.reports]
    assert stages[0] == "lexical" and stages[-1] == "ready"
    percents = [p for stage, p in gate.reports if stage == "embedding"]
    assert percents == sorted(percents) and percents[-1] == 100.0
    # The build was stored: the next start is hybrid at once, without embedding.
    assert isinstance(
        open_stored_index(catalog_fingerprint(tiny_specs), semantic=True), HybridIndex
    )
    again = LiveIndex(tiny_specs).start()
    assert again.wait(0)
    assert again.status.mode == "hybrid"


def test_a_failed_build_keeps_lexical_search(tiny_specs, monkeypatch):
    from codemode.search import live

    class Broken:
        def __init__(self, **kwargs):
            raise RuntimeError("no memory for the model")

    monkeypatch.setattr(live, "resolve_semantic", lambda semantic: True)
    monkeypatch.setattr(live, "HybridIndex", Broken)
    index = LiveIndex(tiny_specs).start()
    assert index.wait(60)
    answer = index.answer("refund a charge", 1)
    assert answer.status.mode == "lexical"
    assert "no memory for the model" in answer.status.note
    assert answer.hits[0].tool == "refundCharge"


def test_search_before_start_is_an_error(tiny_specs):
    with pytest.raises(RuntimeError, match="start"):
        LiveIndex(tiny_specs).search("refund")

"""Learning from use: bounded, decaying, capped, and only for similar queries."""

import pytest

from codemode.search.base import Hit
from codemode.search.live import LiveIndex
from codemode.search.usage import UsageLog
from codemode.testing import ManualClock


def hit(tool, score):
    return Hit("shop", tool, "shop", tool.lower(), score, "", f"{tool}()")


def test_a_used_tool_rises_for_similar_queries_only():
    usage = UsageLog(max_boost=0.2)
    hits = [hit("listInvoices", 0.50), hit("refundCharge", 0.45)]
    usage.record_use("give the customer their money back", "shop", "refundCharge", True)
    ranked = usage.rerank("give customer money back", hits)
    assert [h.tool for h in ranked] == ["refundCharge", "listInvoices"]
    assert ranked[0].score == pytest.approx(
        0.45 + usage.boost("give customer money back", "shop", "refundCharge")
    )
    assert usage.rerank("list invoices for march", hits) == hits


def test_boost_is_capped_and_failures_count_against():
    usage = UsageLog(max_boost=0.1)
    for _ in range(50):
        usage.record_use("refund a charge", "shop", "refundCharge", True)
    assert 0.09 < usage.boost("refund a charge", "shop", "refundCharge") <= 0.1
    for _ in range(200):
        usage.record_use("refund a charge", "shop", "refundCharge", False)
    assert usage.boost("refund a charge", "shop", "refundCharge") < 0


def test_uses_decay_and_the_log_is_bounded():
    clock = ManualClock(1_000_000.0)
    usage = UsageLog(capacity=3, half_life_s=100.0, clock=clock)
    usage.record_use("refund a charge", "shop", "refundCharge", True)
    fresh = usage.boost("refund a charge", "shop", "refundCharge")
    clock.now += 100.0
    assert usage.boost("refund a charge", "shop", "refundCharge") == pytest.approx(
        usage.max_boost * __import__("math").tanh(0.5), rel=1e-6
    )
    assert fresh > usage.boost("refund a charge", "shop", "refundCharge")
    for tool in ("a", "b", "c"):
        usage.record_use("refund a charge", "shop", tool, True)
    assert len(usage) == 3
    assert usage.boost("refund a charge", "shop", "refundCharge") == 0.0


def test_the_log_survives_a_restart(tmp_path):
    usage = UsageLog()
    usage.record_use("refund a charge", "shop", "refundCharge", True)
    usage.save(tmp_path / "usage.json")
    again = UsageLog()
    again.load(tmp_path / "usage.json")
    assert len(again) == 1
    assert again.boost("refund a charge", "shop", "refundCharge") == pytest.approx(
        usage.boost("refund a charge", "shop", "refundCharge")
    )
    again.load(tmp_path / "missing.json")
    assert len(again) == 1


@pytest.mark.needs_model  # numpy comes with the model's extras
def test_query_vectors_decide_similarity_when_given(tmp_path):
    usage = UsageLog()
    usage.record_use("refund a charge", "shop", "refundCharge", True, vector=[1.0, 0.0])
    # Different words, same direction: similar. Same words, orthogonal vector: not similar.
    assert usage.boost("money back please", "shop", "refundCharge", [1.0, 0.0]) > 0
    assert usage.boost("refund a charge", "shop", "refundCharge", [0.0, 1.0]) == 0
    usage.save(tmp_path / "usage.json")
    again = UsageLog()
    again.load(tmp_path / "usage.json")
    assert again.boost("money back please", "shop", "refundCharge", [1.0, 0.0]) == pytest.approx(
        usage.boost("money back please", "shop", "refundCharge", [1.0, 0.0])
    )


def test_live_index_learns_only_when_given_a_log(tiny_specs):
    plain = LiveIndex(tiny_specs, semantic=False).start()
    plain.record_use("customers", "tiny", "deleteCustomer", True)  # no log: nothing happens
    assert plain.usage is None
    learning = LiveIndex(tiny_specs, semantic=False, usage=UsageLog(max_boost=1.0)).start()
    before = [h.tool for h in learning.search("customers", 3)]
    assert before[0] != "deleteCustomer"
    server = learning.search("customers", 1)[0].server
    learning.record_use("customers", server, "deleteCustomer", True)
    assert learning.search("customers", 3)[0].tool == "deleteCustomer"

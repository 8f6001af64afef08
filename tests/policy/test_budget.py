"""Budget: total calls, per tool (exact names and globs), a sliding-minute rate; thread safety."""

from __future__ import annotations

import threading

import pytest

from codemode.policy import Budget, BudgetExceededError, BudgetSettings
from codemode.testing import ManualClock


def test_no_limits_by_default() -> None:
    budget = Budget()
    for _ in range(500):
        budget.acquire("a.b")
    assert budget.total == 500


def test_total_calls() -> None:
    budget = Budget(BudgetSettings(calls=3))
    for name in ("a.x", "a.y", "b.z"):
        budget.acquire(name)
    with pytest.raises(BudgetExceededError) as caught:
        budget.acquire("c.w")
    assert caught.value.which == "calls"
    assert "3" in str(caught.value)
    assert "policy.budget.calls" in caught.value.fix
    assert budget.total == 3  # a refused acquire counts nothing


def test_zero_means_none() -> None:
    with pytest.raises(BudgetExceededError):
        Budget(BudgetSettings(calls=0)).acquire("a.b")


def test_per_tool_exact_and_glob() -> None:
    budget = Budget(BudgetSettings(per_tool={"mail.send_email": 2, "mail.*": 1}))
    budget.acquire("mail.send_email")
    budget.acquire("mail.send_email")  # the exact key (2) beats the glob (1)
    with pytest.raises(BudgetExceededError) as caught:
        budget.acquire("mail.send_email")
    assert caught.value.which == "per_tool"
    assert 'policy.budget.per_tool."mail.send_email"' in caught.value.fix
    # Each tool matching the glob has its own counter.
    budget.acquire("mail.draft")
    budget.acquire("mail.archive")
    with pytest.raises(BudgetExceededError) as glob:
        budget.acquire("mail.draft")
    assert 'per_tool."mail.*"' in glob.value.fix
    budget.acquire("crm.search")  # no limit for other servers
    assert budget.used("mail.send_email") == 2


def test_rate_is_a_sliding_minute() -> None:
    clock = ManualClock()
    budget = Budget(BudgetSettings(rate_per_minute=3), clock=clock)
    budget.acquire("a.b")
    clock.now += 30
    budget.acquire("a.b")
    budget.acquire("a.b")
    with pytest.raises(BudgetExceededError) as caught:
        budget.acquire("a.b")
    assert caught.value.which == "rate_per_minute"
    assert "retry in 30 s" in caught.value.fix
    clock.now += 29.9
    with pytest.raises(BudgetExceededError):
        budget.acquire("a.b")
    clock.now += 0.1  # the first call is now a minute old
    budget.acquire("a.b")
    with pytest.raises(BudgetExceededError):
        budget.acquire("a.b")
    clock.now += 30  # the two calls of t=30 leave the window
    budget.acquire("a.b")
    budget.acquire("a.b")
    assert budget.total == 6


def test_refund_gives_back_one_call() -> None:
    budget = Budget(BudgetSettings(calls=1, per_tool={"a.b": 1}, rate_per_minute=1))
    budget.acquire("a.b")
    budget.refund("a.b")
    budget.acquire("a.b")
    assert budget.total == 1
    budget.refund("x.y")  # never acquired: nothing to give back
    assert budget.total == 1


def test_concurrent_acquires_never_exceed_the_limits() -> None:
    budget = Budget(BudgetSettings(calls=500, per_tool={"t.hot": 100}))
    granted: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def worker(index: int) -> None:
        start.wait(timeout=10)
        for i in range(200):
            name = "t.hot" if i % 2 else f"t.cold{index}"
            try:
                budget.acquire(name)
            except BudgetExceededError:
                continue
            with lock:
                granted.append(name)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(granted) == 500 == budget.total
    assert granted.count("t.hot") == 100 == budget.used("t.hot")

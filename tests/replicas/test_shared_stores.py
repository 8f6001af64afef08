"""The shared pieces alone, against a real Redis-compatible server: leases, budgets, the
audit chain with concurrent writers, vaults."""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from codemode.audit.batching import BatchedAuditLog
from codemode.audit.events import AuditEvent, AuditFilter
from codemode.cli import audit_command
from codemode.errors import StateStoreError
from codemode.policy.budget import BudgetExceededError
from codemode.privacy.vault import TokenSource
from codemode.replicas.audit import RedisAuditLog
from codemode.replicas.budget import SharedBudget
from codemode.replicas.connection import SharedRedis
from codemode.replicas.directory import SessionDirectory
from codemode.replicas.vault import SharedVault
from codemode.settings.policy import BudgetSettings
from tests.replicas.conftest import wait_until


def test_a_lease_keeps_other_replicas_out_until_released_or_expired(redis: SharedRedis) -> None:
    x = SessionDirectory(redis, "rx", lease_s=0.3, idle_s=60)
    y = SessionDirectory(redis, "ry", lease_s=0.3, idle_s=60)
    x.create("s_1", "alice")
    assert y.claim("s_1", "mallory").status == "unknown"  # a foreign owner sees nothing
    busy = y.claim("s_1", "alice")
    assert (busy.status, busy.replica) == ("busy", "rx") and busy.retry_after_s <= 0.3
    x.release("s_1")
    taken = y.claim("s_1", "alice")
    assert (taken.status, taken.replica) == ("ok", "rx")  # rx ran it last
    # y stops renewing (it "died"): the lease lapses by itself and x takes the session back.
    assert wait_until(lambda: x.claim("s_1", "alice").status == "ok")
    assert y.renew(["s_1"]) == ["s_1"]  # y learns it lost the lease
    assert x.holder("s_1") == "rx"


def test_a_session_running_longer_than_its_idle_time_stays_known_and_claimed(
    redis: SharedRedis,
) -> None:
    # A lease of a second renewed every 50 ms: only a pause of the test's process of nearly a
    # second (not a loaded machine's usual one) lets it lapse.
    x = SessionDirectory(redis, "rx", lease_s=1.0, idle_s=1.0)
    y = SessionDirectory(redis, "ry", lease_s=1.0, idle_s=1.0)
    assert x.create("s_1", None).status == "ok"
    deadline = time.monotonic() + 2.5  # past two idle times, renewed as a running session is
    while time.monotonic() < deadline:
        assert x.renew(["s_1"]) == []
        time.sleep(0.05)
    assert x.holder("s_1") == "rx"
    # Registering it again elsewhere (a resume from its checkpoint) is refused while x runs it.
    refused = y.create("s_1", None)
    assert (refused.status, refused.replica) == ("busy", "rx")
    assert y.create("s_1", "mallory").status == "unknown"


def test_two_replicas_spend_a_budget_exactly_once(redis: SharedRedis) -> None:
    settings = BudgetSettings(calls=25, per_tool={"crm.*": 20})
    budgets = [SharedBudget(redis, "s_1", settings, ttl_s=60) for _ in range(2)]
    granted: list[int] = []
    start = threading.Barrier(8)

    def spend(budget: SharedBudget) -> None:
        start.wait(10)
        for _ in range(10):
            try:
                budget.acquire("crm.get")
                granted.append(1)
            except BudgetExceededError:
                pass

    threads = [threading.Thread(target=spend, args=(budgets[i % 2],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(granted) == 20  # the per-tool limit, not more, whoever asked
    assert budgets[1].used("crm.get") == 20 and budgets[0].total == 20
    budgets[0].refund("crm.get")
    budgets[1].acquire("crm.get")
    with pytest.raises(BudgetExceededError, match=r"all 20 calls to crm\.get"):
        budgets[0].acquire("crm.get")


def test_the_rate_limit_counts_calls_through_every_replica(redis: SharedRedis) -> None:
    settings = BudgetSettings(rate_per_minute=3)
    one, two = (SharedBudget(redis, "s_1", settings, ttl_s=60) for _ in range(2))
    one.acquire("crm.a")
    two.acquire("crm.b")
    one.acquire("crm.c")
    with pytest.raises(BudgetExceededError, match="3 tool calls in the last minute") as caught:
        two.acquire("crm.d")
    assert caught.value.which == "rate_per_minute"
    assert one.total == 3


def _event(number: int, session: str) -> AuditEvent:
    return AuditEvent(
        time=1_700_000_000.0 + number,
        session=session,
        server="crm",
        tool=f"t{number}",
        args_digest="sha256:00",
        decision="allow",
        duration_ms=1.0,
        outcome="ok",
    )


def test_concurrent_writers_on_two_replicas_keep_one_unbroken_chain(
    redis_server: Any, redis: SharedRedis
) -> None:
    logs = [RedisAuditLog(redis), RedisAuditLog(SharedRedis(redis_server.url))]

    def write(index: int) -> None:
        for number in range(50):
            logs[index % 2].append(_event(number, f"s_{index}"))

    threads = [threading.Thread(target=write, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert logs[0].verify() == 200
    assert len(logs[1].query(None)) == 100  # the default limit: the newest 100
    assert {event.session for event in logs[0].query()} <= {"s_0", "s_1", "s_2", "s_3"}
    # Removing an entry from the middle breaks the chain at the entry after it.
    entries = redis.client.xrange(logs[0].stream, count=3)
    redis.client.xdel(logs[0].stream, entries[1][0])
    with pytest.raises(StateStoreError, match="chain is broken at entry"):
        logs[0].verify()


def test_batches_and_single_events_from_two_replicas_form_one_chain_in_order(
    redis_server: Any, redis: SharedRedis
) -> None:
    logs = [RedisAuditLog(redis), RedisAuditLog(SharedRedis(redis_server.url))]
    batched = BatchedAuditLog(logs[0], linger_s=0.01, max_batch=8)

    def write(index: int) -> None:
        for number in range(40):
            event = _event(number, f"s_{index}")
            (batched.append if index % 2 == 0 else logs[1].append)(event)

    threads = [threading.Thread(target=write, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert batched.sync()
    assert logs[0].verify() == 160
    events = logs[0].query(AuditFilter(limit=None))
    for index in range(4):  # each writer's events in the order it appended them
        assert [e.tool for e in events if e.session == f"s_{index}"] == [f"t{n}" for n in range(40)]
    batched.close()
    with pytest.raises(StateStoreError, match="closed"):
        logs[0].append_many([_event(1, "late")])


def test_a_vault_loaded_on_another_replica_resolves_and_continues_its_tokens(
    redis: SharedRedis,
) -> None:
    source = TokenSource("crm", "customer", "email")
    first = SharedVault(redis, "s_1", ttl_s=60)
    first.reserve("<EMAIL_2>")  # seen in data as it came: never issued
    token = first.token_for("EMAIL", "ada@example.com", source)
    assert token == "<EMAIL_1>"
    first.mark_delivered(token, "mail")
    second = SharedVault(redis, "s_1", ttl_s=60)
    assert second.value_of("<EMAIL_1>") == "ada@example.com"
    # Its values are known by value too (a text as long is looked up, not skipped as longer).
    assert second.token_of("ada@example.com") == "<EMAIL_1>"
    assert second.seen_again("ada@example.com", lambda: source) == "<EMAIL_1>"
    entry = second.lookup("<EMAIL_1>")
    assert entry is not None and entry.origins == {"crm"} and entry.delivered == {"mail"}
    assert second.token_for("EMAIL", "bob@example.com", source) == "<EMAIL_3>"
    second.wipe()  # this replica's copy only
    assert SharedVault(redis, "s_1", ttl_s=60).value_of("<EMAIL_3>") == "bob@example.com"
    assert SharedVault(redis, "s_2", ttl_s=60).value_of("<EMAIL_1>") is None


def test_codemode_audit_reads_the_shared_log_when_one_is_configured(
    redis: SharedRedis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = RedisAuditLog(redis)
    for number in range(3):
        log.append(_event(number, "s_9"))
    config = tmp_path / "codemode.toml"
    config.write_text(
        f'[gateway]\nstate_dir = "state"\nshared_store = "{redis.url}"\n', encoding="utf-8"
    )
    parser = argparse.ArgumentParser()
    audit_command.add_arguments(parser)
    args = parser.parse_args(["--config", str(config), "--json", "--limit", "2"])
    assert audit_command.run(args) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["path"] == redis.url
    assert [event["tool"] for event in shown["events"]] == ["t1", "t2"]

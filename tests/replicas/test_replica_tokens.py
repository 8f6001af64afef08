"""Replicas accept the same bearer tokens: each replica serving HTTP keeps a fingerprint of its
token set in the shared store while it serves, and ``codemode doctor`` compares the live ones
(against a real Valkey server)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from codemode.cli.doctor_checks import check_replica_tokens
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.gateway.auth import TokenTable
from codemode.gateway.serve import _publish_token_set
from codemode.replicas.connection import SharedRedis
from codemode.replicas.tokens import TokenSetBeacon, live_token_sets, token_set_fingerprint

ALICE = TokenTable.build([("alice", "a-secret"), ("bob", "b-secret")])


def test_the_fingerprint_tells_sets_apart_whatever_the_order() -> None:
    same = TokenTable.build([("bob", "b-secret"), ("alice", "a-secret")])
    other = TokenTable.build([("alice", "a-secret"), ("bob", "another")])
    assert token_set_fingerprint(ALICE.entries) == token_set_fingerprint(same.entries)
    assert token_set_fingerprint(ALICE.entries) != token_set_fingerprint(other.entries)
    assert "a-secret" not in token_set_fingerprint(ALICE.entries)


def test_doctor_says_whether_the_live_replicas_agree(redis_server: Any) -> None:
    redis = SharedRedis(redis_server.url)
    try:
        assert check_replica_tokens(redis_server.url).detail.startswith("no replica serves")
        one = TokenSetBeacon(redis, token_set_fingerprint(ALICE.entries))
        two = TokenSetBeacon(redis, token_set_fingerprint(ALICE.entries))
        one.renew(60)
        two.renew(60)
        agree = check_replica_tokens(redis_server.url)
        assert agree.level == "ok" and "2 replica(s) serving HTTP" in agree.detail
        generated = TokenSetBeacon(redis, token_set_fingerprint(TokenTable.generate().entries))
        generated.renew(60)
        differ = check_replica_tokens(redis_server.url)
        assert differ.level == "fail" and "2 different token sets" in differ.detail
        assert "--token-file" in differ.fix
        generated.withdraw()
        assert check_replica_tokens(redis_server.url).level == "ok"
    finally:
        redis.close()


@pytest.mark.anyio
async def test_a_serving_replica_publishes_its_set_and_withdraws_it_when_it_stops(
    redis_server: Any,
) -> None:
    config = CodemodeConfig(
        servers={}, gateway=GatewaySettings(shared_store=redis_server.url, session_lease_s=1)
    )
    redis = SharedRedis(redis_server.url)
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(_publish_token_set, config, ALICE)
                while not live_token_sets(redis):  # published once the store answers
                    await anyio.sleep(0.01)
                assert live_token_sets(redis) == {token_set_fingerprint(ALICE.entries): 1}
                group.cancel_scope.cancel()
        assert live_token_sets(redis) == {}
    finally:
        redis.close()

"""A client's session quota (``max_sessions_per_client``) counts its sessions on every replica:
first the shared directory alone, then two engines (replicas A and B) on a real
Redis-compatible server, each test shaped so that a quota counted per replica fails it."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.catalog.catalog import Catalog
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.errors import SessionQuotaError, StateStoreError
from codemode.replicas.connection import SharedRedis
from codemode.replicas.directory import Claim, SessionDirectory
from tests.replicas.conftest import Crm, replica_config, wait_until

ACROSS = "already holds 2 sessions across all gateway replicas"


# --- the directory alone ------------------------------------------------------------------


def test_replicas_racing_for_a_clients_last_places_take_exactly_its_quota(
    redis: SharedRedis,
) -> None:
    directories = [SessionDirectory(redis, name, lease_s=30, idle_s=60) for name in ("rx", "ry")]
    answers: list[Claim] = []
    start = threading.Barrier(12)

    def open_one(index: int) -> None:
        start.wait(10)
        directory = directories[index % 2]
        answers.append(directory.create(f"s_{index}", "alice", "alice", 3))

    threads = [threading.Thread(target=open_one, args=(index,)) for index in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(answer.status for answer in answers) == ["full"] * 9 + ["ok"] * 3
    assert {answer.held for answer in answers if answer.status == "full"} == {3}
    assert directories[0].client_sessions("alice") == 3
    # Another client has its own count.
    assert directories[1].create("s_bob", "bob", "bob", 3).status == "ok"


def test_a_moved_session_counts_once_and_a_closed_one_frees_its_place(
    redis: SharedRedis,
) -> None:
    x = SessionDirectory(redis, "rx", lease_s=30, idle_s=60)
    y = SessionDirectory(redis, "ry", lease_s=30, idle_s=60)
    assert x.create("s_1", "alice", "alice", 1).status == "ok"
    x.release("s_1", "alice")
    taken = y.claim("s_1", "alice")
    assert (taken.status, taken.client) == ("ok", "alice")  # y learns whom it counts against
    y.release("s_1", taken.client)
    assert y.client_sessions("alice") == 1
    assert y.create("s_2", "alice", "alice", 1).held == 1
    x.forget("s_1")  # closed through x: the place is free on every replica
    assert y.client_sessions("alice") == 0
    # A late release of the closed session (its lease was lost) does not count it again.
    y.release("s_1", "alice")
    assert y.create("s_2", "alice", "alice", 1).status == "ok"
    assert x.client_sessions("alice") == 1


def test_a_running_session_stays_counted_and_a_dead_replicas_sessions_lapse(
    redis: SharedRedis,
) -> None:
    # A lease of a second renewed every 50 ms: only a pause of the test's process of nearly a
    # second (not a loaded machine's usual one) lets it lapse.
    x = SessionDirectory(redis, "rx", lease_s=1.0, idle_s=1.0)
    y = SessionDirectory(redis, "ry", lease_s=1.0, idle_s=1.0)
    assert x.create("s_1", "alice", "alice", 2).status == "ok"
    assert x.create("s_2", "alice", "alice", 2).status == "ok"
    deadline = time.monotonic() + 2.5  # past two idle times; s_1 runs on x, renewed as it runs
    while time.monotonic() < deadline:
        assert x.renew(["s_1"], {"s_1": "alice"}) == []
        time.sleep(0.05)
    # s_2 was never renewed: it lapsed; s_1 still counts.
    assert y.client_sessions("alice") == 1
    assert y.create("s_3", "alice", "alice", 2).status == "ok"
    assert y.create("s_4", "alice", "alice", 2).status == "full"
    # x dies (nothing renews s_1, nothing closes anything): every place lapses by itself,
    # and the client's count leaves nothing behind in the store.
    key = redis.key("client", "alice", "sessions")
    assert wait_until(lambda: not redis.client.exists(key), timeout_s=10)
    assert y.create("s_5", "alice", "alice", 2).status == "ok"


def test_a_released_session_leaves_the_count_and_rejoins_it_unless_the_quota_is_full(
    redis: SharedRedis,
) -> None:
    x = SessionDirectory(redis, "rx", lease_s=30, idle_s=60)
    y = SessionDirectory(redis, "ry", lease_s=30, idle_s=60)
    assert x.create("s_1", "alice", "alice", 2).status == "ok"
    assert x.create("s_2", "alice", "alice", 2).status == "ok"
    x.release("s_1", "alice")
    assert y.create("s_3", "alice", "alice", 2).status == "full"
    assert x.uncount("s_1", "alice")  # released on x: its place is free on y
    assert y.client_sessions("alice") == 1
    # Releasing the lease again, or renewing it, does not count a released session.
    x.release("s_1", "alice")
    assert x.renew(["s_2"], {"s_2": "alice"}) == []
    assert y.client_sessions("alice") == 1
    assert y.create("s_3", "alice", "alice", 2).status == "ok"
    # Resumed (on y), it finds the quota full: refused, naming what holds it.
    taken = y.claim("s_1", "alice")
    assert (taken.status, taken.client, taken.released) == ("ok", "alice", True)
    refused = y.rejoin("s_1", "alice", 2)
    assert (refused.status, refused.held, sorted(refused.holding)) == ("full", 2, ["s_2", "s_3"])
    assert y.client_sessions("alice") == 2
    y.forget("s_3")
    assert y.rejoin("s_1", "alice", 2).status == "ok"
    assert y.client_sessions("alice") == 2
    # Counted again: releasing its lease keeps its place, as for any idle session.
    y.release("s_1", "alice")
    assert x.create("s_4", "alice", "alice", 2).status == "full"


def test_only_the_replica_that_ran_a_session_last_can_free_its_place(
    redis: SharedRedis,
) -> None:
    x = SessionDirectory(redis, "rx", lease_s=30, idle_s=60)
    y = SessionDirectory(redis, "ry", lease_s=30, idle_s=60)
    assert x.create("s_1", "alice", "alice", 1).status == "ok"
    x.release("s_1", "alice")
    assert y.claim("s_1", "alice").status == "ok"  # moved to y; x keeps a stale copy
    assert not x.uncount("s_1", "alice")  # x releasing its stale copy frees nothing
    assert y.create("s_2", "alice", "alice", 1).status == "full"


def test_replicas_racing_for_a_place_freed_by_a_release_take_it_once(
    redis: SharedRedis,
) -> None:
    x = SessionDirectory(redis, "rx", lease_s=30, idle_s=60)
    y = SessionDirectory(redis, "ry", lease_s=30, idle_s=60)
    assert x.create("s_old", "alice", "alice", 1).status == "ok"
    x.release("s_old", "alice")
    assert x.uncount("s_old", "alice")
    assert x.claim("s_old", "alice").status == "ok"
    start = threading.Barrier(2)
    answers: dict[str, str] = {}

    def rejoin() -> None:
        start.wait(10)
        answers["rejoin"] = x.rejoin("s_old", "alice", 1).status

    def create() -> None:
        start.wait(10)
        answers["create"] = y.create("s_new", "alice", "alice", 1).status

    threads = [threading.Thread(target=rejoin), threading.Thread(target=create)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(answers.values()) == ["full", "ok"]
    assert x.client_sessions("alice") == 1


# --- two engines ----------------------------------------------------------------------------


def _engines(redis_server: Any, crm: Crm, tmp_path: Path, **gateway: Any) -> list[Codemode]:
    """Replicas A and B (not started) whose ``[gateway]`` has ``gateway`` on top."""
    engines = []
    for name in ("a", "b"):
        config = replica_config(tmp_path, name, redis_server.url)
        config = config.model_copy(update={"gateway": config.gateway.model_copy(update=gateway)})
        engines.append(
            Codemode(
                config, catalog=Catalog([PythonConnector("crm", crm.functions())]), semantic=False
            )
        )
    return engines


async def _open(engine: Codemode, client: str = "alice") -> str:
    """A new session of ``client`` on ``engine`` (its code runs there); its handle."""
    result = await engine.execute("print('hi')", client=client)
    assert (result.status, result.stdout) == ("ok", "hi\n"), result.render_text()
    assert result.session is not None
    return result.session


async def _assert_refused(engine: Codemode, client: str = "alice") -> None:
    """A new session of ``client`` on ``engine`` is refused: its quota is used up elsewhere too."""
    with pytest.raises(SessionQuotaError, match=ACROSS):
        await engine.execute("print('one more')", client=client)


@pytest.mark.anyio
async def test_a_client_at_its_quota_on_a_is_refused_on_b_until_it_closes_one(
    redis_server: Any, crm: Crm, tmp_path: Path
) -> None:
    engines = _engines(redis_server, crm, tmp_path, max_sessions_per_client=2)
    async with engines[0] as a, engines[1] as b:
        first, _ = await _open(a), await _open(a)
        with pytest.raises(SessionQuotaError, match=ACROSS) as refused:
            await b.execute("print('third')", client="alice")
        assert "gateway.max_sessions_per_client = 2" in str(refused.value)
        assert "closed on any replica" in str(refused.value.fix)
        await _open(b, client="bob")  # the quota is per client
        assert await a.close_session(first)
        third = await _open(b)
        await _assert_refused(a)
        assert b.registry is not None and third in b.registry.handles(None)


@pytest.mark.anyio
async def test_a_session_moving_between_replicas_counts_once(
    redis_server: Any, crm: Crm, tmp_path: Path
) -> None:
    engines = _engines(redis_server, crm, tmp_path, max_sessions_per_client=2)
    async with engines[0] as a, engines[1] as b:
        moving = await _open(a)
        for replica in (b, a, b):
            ran = await replica.execute("print('here')", session=moving, client="alice")
            assert ran.stdout == "here\n", ran.render_text()
        await _open(b)
        for replica in (a, b):
            await _assert_refused(replica)


@pytest.mark.anyio
async def test_a_session_adopted_after_its_replica_stopped_counts_once(
    redis_server: Any, crm: Crm, tmp_path: Path
) -> None:
    engines = _engines(redis_server, crm, tmp_path, max_sessions_per_client=2)
    async with contextlib.AsyncExitStack() as a_runs, engines[1] as b:
        a = await a_runs.enter_async_context(engines[0])
        adopted = await _open(a)
        await a_runs.aclose()  # A is gone: its session continues on B from its checkpoint
        continued = await b.execute("print('on b')", session=adopted, client="alice")
        assert continued.stdout == "on b\n", continued.render_text()
        await _open(b)
        await _assert_refused(b)
        assert b.shared is not None
        assert b.shared.registry.directory.client_sessions("alice") == 2


@pytest.mark.anyio
async def test_the_sessions_of_a_stopped_replica_free_their_places_when_they_expire(
    redis_server: Any, crm: Crm, tmp_path: Path
) -> None:
    engines = _engines(
        redis_server,
        crm,
        tmp_path,
        max_sessions_per_client=2,
        session_idle_timeout_s=3.0,
        session_lease_s=0.5,
    )
    async with contextlib.AsyncExitStack() as a_runs, engines[1] as b:
        a = await a_runs.enter_async_context(engines[0])
        await _open(a)
        await _open(a)
        await _assert_refused(b)
        await a_runs.aclose()  # nobody will close A's sessions: they lapse in the store
        assert b.shared is not None
        directory = b.shared.registry.directory
        with anyio.fail_after(30):
            while directory.client_sessions("alice") > 0:
                await anyio.sleep(0.1)  # polling a condition with a bound
        await _open(b)
        await _open(b)


@pytest.mark.anyio
async def test_a_session_paused_for_longer_than_its_idle_time_keeps_its_place(
    redis_server: Any, crm: Crm, tmp_path: Path
) -> None:
    engines = _engines(
        redis_server,
        crm,
        tmp_path,
        max_sessions_per_client=2,
        session_idle_timeout_s=2.0,
        session_lease_s=0.5,
    )
    async with engines[0] as a, engines[1] as b:
        order = "from servers import crm\ncrm.place_order(item='pear')"
        paused = await a.execute(order, client="alice")
        assert paused.status == "approval_required", paused.render_text()
        idle = await _open(a)  # opened after the paused one, and left idle
        assert b.shared is not None
        directory = b.shared.registry.directory
        with anyio.fail_after(30):
            while directory.holder(idle) is not None:  # expired (A closes it)
                await anyio.sleep(0.1)  # polling a condition with a bound
        # The paused one, touched last before the idle one, still counts: A renews its place
        # with its lease. One place is left.
        assert directory.client_sessions("alice") == 1
        await _open(b)
        await _assert_refused(b)


@pytest.mark.anyio
async def test_a_store_outage_refuses_new_sessions_with_the_store_error(
    redis_server: Any, crm: Crm, tmp_path: Path
) -> None:
    engines = _engines(redis_server, crm, tmp_path, max_sessions_per_client=2)
    async with engines[0] as a:
        redis_server.stop()
        # No count per replica instead: the quota cannot be checked, so nothing opens.
        with pytest.raises(StateStoreError, match=r"shared store at .* did not answer"):
            await a.execute("print(1)", client="alice")
        assert a.registry is not None and len(a.registry) == 0
        redis_server.start()
        await _open(a)


@pytest.mark.anyio
async def test_a_session_released_on_a_frees_its_place_for_b_and_rejoins_when_resumed(
    redis_server: Any, crm: Crm, tmp_path: Path
) -> None:
    engines = _engines(redis_server, crm, tmp_path, max_sessions_per_client=2)
    async with engines[0] as a, engines[1] as b:
        keep = "from state import keep\nx = 41\nkeep('x')\nprint('first')"
        released = await a.execute(keep, client="alice")
        assert released.session is not None
        await _open(a)
        await _assert_refused(b)
        assert a.shared is not None and a.registry is not None
        registry = a.registry
        # Released on A (what idle release and a 2025 connection's end do): B gets its place.
        assert await anyio.to_thread.run_sync(registry.release_now, released.session)
        assert a.shared.registry.directory.client_sessions("alice") == 1
        third = await _open(b)
        # Resumed now, it needs a place again: the quota is full, and the refusal names
        # the sessions that hold it and how to free one.
        with pytest.raises(SessionQuotaError, match=ACROSS) as refused:
            await b.execute("print(x + 1)", session=released.session, client="alice")
        assert third[:12] in str(refused.value)
        assert "closed on any replica" in str(refused.value.fix)
        assert "once released" in str(refused.value.fix)
        assert await b.close_session(third)
        resumed = await b.execute("print(x + 1)", session=released.session, client="alice")
        assert (resumed.status, resumed.stdout) == ("ok", "42\n"), resumed.render_text()
        await _assert_refused(a)  # counted again: two places taken

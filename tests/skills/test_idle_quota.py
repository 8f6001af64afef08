"""``max_sessions`` bounds the sessions that hold a sandbox: released sessions do not count,
and at the limit the least recently used idle session is released to make room (real
bubblewrap sandboxes, checkpoints in the embedded state store)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings, load_config
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.engine.session import Session
from codemode.errors import ConfigError, SessionQuotaError
from codemode.policy import PolicySettings
from codemode.sandbox import Limits, SandboxSettings
from codemode.sandbox.provider import PooledSandboxes
from codemode.sandbox.runner import Sandbox

pytestmark = pytest.mark.anyio

# Background releases only where a test waits for them; otherwise sessions are released
# only to make room.
NEVER_S = 600.0
ASK_BEFORE_ORDERS = {
    "rules": [{"tools": ["shop.place_order"], "action": "ask", "reason": "orders cost money"}]
}


def keep(name: str, value: int) -> str:
    return (
        f"open('{name}.txt', 'w').write('{name}')\n"
        f"from state import keep\n{name} = {value}\nkeep('{name}')\n"
    )


def show(name: str) -> str:
    return f"print(open('{name}.txt').read(), {name})"


class Gate:
    """A tool that blocks until the test opens it (code that is running for as long)."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.opened = threading.Event()

    def gate(self) -> str:
        """Wait until the test lets the call return."""
        self.entered.release()
        self.opened.wait(30)
        return "through"


@pytest.fixture
def gate() -> Iterator[Gate]:
    made = Gate()
    yield made
    made.opened.set()  # a failed test leaves no thread waiting


@pytest.fixture
def make_engine(shop: Any, gate: Gate, tmp_path: Path) -> Callable[..., Codemode]:
    def make(release_s: float = NEVER_S, **gateway: Any) -> Codemode:
        catalog = Catalog([PythonConnector("shop", [*shop.functions(), gate.gate])])
        policy = PolicySettings.from_mapping(ASK_BEFORE_ORDERS, "t")
        config = CodemodeConfig(
            servers={},
            sandbox=SandboxSettings(limits=Limits(wall_time_s=60, cpu_time_s=5), pool_size=1),
            gateway=GatewaySettings(
                state_dir=tmp_path / "state", idle_release_s=release_s, **gateway
            ),
            policy=policy,
        )
        return Codemode(config, catalog=catalog, semantic=False, audit=False)

    return make


def inner(record: Session) -> Sandbox | None:
    sandbox = record.sandbox.inner.sandbox  # type: ignore[attr-defined]
    assert sandbox is None or isinstance(sandbox, Sandbox)
    return sandbox


def alive(pid: int | None) -> bool:
    """A process that exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def holding(records: list[Session]) -> list[Session]:
    """The sessions whose sandbox processes (bwrap and the guest) are alive now."""
    held = []
    for record in records:
        sandbox = inner(record)
        if sandbox is not None and (alive(sandbox.process.pid) or alive(sandbox.guest_pid)):
            held.append(record)
    return held


class Watch:
    """Every sandbox a session takes from the pool: how many sessions held a live sandbox at
    that moment (the one taking it holds none then); ``records``: the test's sessions in the
    order it opened them."""

    def __init__(self, engine: Codemode) -> None:
        assert isinstance(engine.sandboxes, PooledSandboxes) and engine.registry is not None
        self.engine = engine
        self.records: list[Session] = []
        self.others_holding: list[int] = []
        pool, registry = engine.sandboxes.pool, engine.registry
        take = pool.acquire

        def acquire() -> Sandbox:
            self.others_holding.append(len(holding(registry.sessions())))
            return take()

        pool.acquire = acquire  # type: ignore[method-assign]

    def opened(self, handle: str | None) -> Session:
        assert self.engine.registry is not None and handle is not None
        record = self.engine.registry.get(handle, None)
        self.records.append(record)
        return record

    def states(self) -> list[str]:
        states = self.engine.session_states(None)
        return [states[record.handle] for record in self.records]


async def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    with anyio.fail_after(timeout_s):
        while not condition():
            await anyio.sleep(0.02)


async def test_released_sessions_do_not_count_and_sandboxes_never_exceed_the_limit(
    make_engine: Callable[..., Codemode],
) -> None:
    async with make_engine(release_s=0.2, max_sessions=2) as engine:
        watch = Watch(engine)
        for name, value in (("a", 1), ("b", 2)):
            result = await engine.execute(keep(name, value))
            assert result.status == "ok", result.render_text()
            watch.opened(result.session)
        await wait_until(lambda: watch.states() == ["released", "released"])
        assert holding(watch.records) == []
        # Three more sessions: the two released ones hold nothing, so there is room.
        for name, value in (("c", 3), ("d", 4), ("e", 5)):
            result = await engine.execute(keep(name, value))
            assert result.status == "ok", result.render_text()
            watch.opened(result.session)
            assert len(holding(watch.records)) <= 2
        assert len(watch.others_holding) == 5 and max(watch.others_holding) <= 1
        # Every one of them continues with its files and kept variables.
        for record, name, value in zip(watch.records, "abcde", range(1, 6), strict=True):
            again = await engine.execute(show(name), session=record.handle)
            assert again.stdout == f"{name} {value}\n", again.render_text()
            assert len(holding(watch.records)) <= 2
        assert max(watch.others_holding) <= 1


async def test_new_sessions_arriving_together_never_hold_more_sandboxes_than_the_limit(
    make_engine: Callable[..., Codemode],
) -> None:
    async with make_engine(max_sessions=2) as engine:
        watch = Watch(engine)
        for name, value in (("a", 1), ("b", 2)):
            watch.opened((await engine.execute(keep(name, value))).session)
        outcomes: list[str] = []

        async def new_session(value: int) -> None:
            try:
                result = await engine.execute(f"n = {value}\nprint(n)")
            except SessionQuotaError as refused:  # every sandbox was running code then
                assert "running code or waiting for an approval" in str(refused)
                outcomes.append("refused")
            else:
                assert result.stdout == f"{value}\n", result.render_text()
                outcomes.append("ok")

        async with anyio.create_task_group() as group:
            for value in range(6):
                group.start_soon(new_session, value)
        assert len(outcomes) == 6 and outcomes.count("ok") >= 2, outcomes
        assert len(watch.others_holding) >= 4 and max(watch.others_holding) <= 1
        assert engine.registry is not None
        assert len(holding(engine.registry.sessions())) <= 2
        # The first two were pushed out by the newcomers, and come back intact.
        for record, name, value in zip(watch.records, "ab", (1, 2), strict=True):
            again = await engine.execute(show(name), session=record.handle)
            assert again.stdout == f"{name} {value}\n", again.render_text()
        assert max(watch.others_holding) <= 1


async def test_a_restore_at_the_limit_releases_the_least_recently_used_idle_session(
    make_engine: Callable[..., Codemode],
) -> None:
    async with make_engine(max_sessions=2) as engine:
        watch = Watch(engine)
        first = await engine.execute(keep("a", 1) + "scratch = 'not kept'")
        a = watch.opened(first.session)
        b = watch.opened((await engine.execute(keep("b", 2))).session)
        a_pids = [inner(a).process.pid, inner(a).guest_pid]  # type: ignore[union-attr]
        # A third session: the least recently used idle one (a) gives its sandbox back.
        c = watch.opened((await engine.execute(keep("c", 3))).session)
        assert watch.states() == ["released", "idle", "idle"]
        assert not any(alive(pid) for pid in a_pids)
        assert holding(watch.records) == [b, c]

        # a comes back: now b is the least recently used, and it is released for a.
        back = await engine.execute(show("a") + "\nprint('scratch' in globals())", session=a.handle)
        assert back.stdout == "a 1\nFalse\n", back.render_text()
        assert back.restored.variables == ["a"]
        assert watch.states() == ["idle", "released", "idle"]
        assert holding(watch.records) == [a, c]

        # And b, with its state, pushing out c (a ran more recently).
        again = await engine.execute(show("b"), session=b.handle)
        assert again.stdout == "b 2\n" and again.restored.files == ["b.txt"]
        assert watch.states() == ["idle", "idle", "released"]
        assert max(watch.others_holding) <= 1


async def test_when_every_sandbox_is_busy_or_paused_a_new_session_is_refused(
    make_engine: Callable[..., Codemode], gate: Gate
) -> None:
    async with make_engine(max_sessions=2) as engine, anyio.create_task_group() as group:
        watch = Watch(engine)
        paused = await engine.execute(
            "from servers import shop\nshop.place_order(item='pear', quantity=1)"
        )
        assert paused.status == "approval_required", paused.render_text()
        watch.opened(paused.session)
        running: dict[str, Any] = {}

        async def run() -> None:
            running["result"] = await engine.execute("from servers import shop\nshop.gate()")

        group.start_soon(run)
        assert await anyio.to_thread.run_sync(gate.entered.acquire, True, 30)
        with pytest.raises(SessionQuotaError) as refused:
            await engine.execute("print('third')")
        message = str(refused.value)
        assert "2 sessions hold a sandbox in the gateway" in message
        assert "gateway.max_sessions = 2" in message
        assert "running code or waiting for an approval" in message
        assert "raise gateway.max_sessions" in message
        # The refused session is not kept: it never ran.
        assert len(engine.session_states(None)) == 2

        gate.opened.set()
        await wait_until(lambda: "result" in running)
        assert running["result"].stdout == "", running["result"].render_text()
        # The finished one is idle now: the next new session takes its place.
        third = await engine.execute("print('third')")
        assert third.stdout == "third\n", third.render_text()
        states = engine.session_states(None)
        assert sorted(states.values()) == ["idle", "paused", "released"]
        assert states[paused.session or ""] == "paused"


async def test_an_execute_arriving_while_its_session_is_released_for_room_keeps_it(
    make_engine: Callable[..., Codemode], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with make_engine(max_sessions=2) as engine:
        assert engine.registry is not None
        watch = Watch(engine)
        a = watch.opened((await engine.execute(keep("a", 1))).session)
        b = watch.opened((await engine.execute(keep("b", 2))).session)
        asked, go = threading.Event(), threading.Event()
        held_alone = engine.registry.held_alone

        def slow_check(record: Session, idle_s: float) -> bool:
            if record is a:  # a's release waits at its last check until the test says so
                asked.set()
                go.wait(30)
            return held_alone(record, idle_s)

        monkeypatch.setattr(engine.registry, "held_alone", slow_check)
        outcome: dict[str, Any] = {}
        async with anyio.create_task_group() as group:

            async def new_session() -> None:
                outcome["new"] = await engine.execute(keep("c", 3))

            async def back_to_a() -> None:
                outcome["a"] = await engine.execute(show("a"), session=a.handle)

            group.start_soon(new_session)
            await anyio.to_thread.run_sync(asked.wait, 30)
            group.start_soon(back_to_a)
            await wait_until(lambda: a.busy == 2)  # checked out, waiting for the release
            go.set()
        # a's execution came first: a kept its sandbox; b made room for the new session.
        assert outcome["a"].stdout == "a 1\n" and outcome["a"].restored is None
        assert outcome["new"].status == "ok", outcome["new"].render_text()
        watch.opened(outcome["new"].session)
        assert watch.states() == ["idle", "released", "idle"]
        assert holding(watch.records) == [a, watch.records[2]]
        assert max(watch.others_holding) <= 1
        after = await engine.execute(show("b"), session=b.handle)
        assert after.stdout == "b 2\n", after.render_text()


async def test_idle_sessions_keep_their_sandbox_when_idle_release_is_off(
    make_engine: Callable[..., Codemode],
) -> None:
    async with make_engine(release_s=0, max_sessions=1) as engine:
        first = await engine.execute("x = 1")
        with pytest.raises(SessionQuotaError, match=r"gateway\.idle_release_s = 0"):
            await engine.execute("print('second')")
        assert engine.session_states(None) == {first.session: "idle"}


async def test_max_stored_sessions_counts_released_sessions(
    make_engine: Callable[..., Codemode],
) -> None:
    async with make_engine(max_sessions=1, max_stored_sessions=2) as engine:
        first = await engine.execute("x = 1")
        second = await engine.execute("y = 2")
        states = engine.session_states(None)
        assert (states[first.session or ""], states[second.session or ""]) == ("released", "idle")
        with pytest.raises(SessionQuotaError) as refused:
            await engine.execute("print('third')")
        message = str(refused.value)
        assert "the gateway keeps 2 sessions" in message
        assert "gateway.max_stored_sessions = 2" in message
        assert "raise gateway.max_stored_sessions" in message
        assert await engine.close_session(first.session or "")
        third = await engine.execute("print('third')")
        assert third.stdout == "third\n", third.render_text()


def test_max_stored_sessions_is_at_least_max_sessions(tmp_path: Path) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text("[gateway]\nmax_sessions = 8\nmax_stored_sessions = 4\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.key == "gateway.max_stored_sessions"
    assert "max_stored_sessions (4) is below max_sessions (8)" in str(caught.value)
    assert "raise max_stored_sessions to at least 8" in str(caught.value)
    # The default (1024) too: a larger max_sessions needs a larger store.
    path.write_text("[gateway]\nmax_sessions = 2000\n")
    with pytest.raises(ConfigError, match=r"max_stored_sessions \(1024\) is below"):
        load_config(path)
    path.write_text("[gateway]\nmax_sessions = 8\nmax_stored_sessions = 8\n")
    assert load_config(path).gateway.max_stored_sessions == 8
    assert GatewaySettings().max_stored_sessions == 1024

"""Cancellation, progress reports and per-client session quotas, in the real sandbox.

The code under test waits on tools the test controls (``signal_ready``, ``wait_for_release``),
so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.engine.life import Life
from codemode.errors import SessionQuotaError
from codemode.sandbox import Limits, SandboxSettings
from codemode.sandbox.result import ExecutionResult

pytestmark = pytest.mark.anyio

WAIT_S = 20.0


class Desk:
    """Tools whose calls the test sees and steers; every side effect is recorded."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.waiting = threading.Event()
        self.release = threading.Event()
        self.released = threading.Event()
        self.orders: list[str] = []

    def functions(self) -> list[Callable[..., Any]]:
        def signal_ready() -> str:
            """Tell the test the code is running."""
            self.ready.set()
            return "ok"

        def wait_for_release() -> str:
            """Block until the test says go (bounded)."""
            self.waiting.set()
            self.release.wait(WAIT_S)
            self.released.set()
            return "released"

        def place_order(item: str) -> str:
            """A side effect."""
            self.orders.append(item)
            return item

        return [signal_ready, wait_for_release, place_order]


@pytest.fixture
def desk() -> Desk:
    return Desk()


@pytest.fixture
async def engine(desk: Desk, tmp_path: Path) -> AsyncIterator[Codemode]:
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=60), pool_size=1),
        gateway=GatewaySettings(
            max_sessions_per_client=2, progress_interval_s=0.05, state_dir=tmp_path
        ),
    )
    catalog = Catalog([PythonConnector("desk", desk.functions())])
    async with Codemode(config, catalog=catalog, semantic=False) as engine:
        yield engine


async def _cancel_when_ready(
    engine: Codemode,
    desk: Desk,
    code: str,
    session: str,
    ready: threading.Event | None = None,
    printed: bytes | None = None,
) -> None:
    """Start ``code``, wait until it called ``signal_ready`` (or set ``ready``, or printed
    ``printed``: past its tool call, whose reply it has then read), then cancel."""
    ready = ready or (threading.Event() if printed is not None else desk.ready)

    def on_output(stream: str, data: bytes) -> None:
        if printed is not None and printed in data:
            ready.set()

    async with anyio.create_task_group() as group:
        group.start_soon(lambda: engine.execute(code, session=session, on_output=on_output))
        assert await anyio.to_thread.run_sync(ready.wait, WAIT_S), "the code never got there"
        group.cancel_scope.cancel()


async def _next(engine: Codemode, code: str, session: str) -> ExecutionResult:
    with anyio.fail_after(WAIT_S):
        return await engine.execute(code, session=session)


async def test_a_cancel_interrupts_the_code_and_keeps_the_session(
    engine: Codemode, desk: Desk
) -> None:
    first = await engine.execute("x = 41")
    assert first.session is not None
    code = (
        "from servers import desk\ndesk.signal_ready()\nprint('started', flush=True)\n"
        "import time\ntime.sleep(120)\nx = 0"
    )
    # Cancelled once the reply of signal_ready was read: cancelled earlier, the call in
    # flight is abandoned and the code ends on its ToolError instead.
    await _cancel_when_ready(engine, desk, code, first.session, printed=b"started")
    after = await _next(engine, "print(x + 1)", first.session)
    # The interrupt stopped the code before `x = 0`, without restarting the sandbox.
    assert after.status == "ok" and after.stdout == "42\n", after.render_text()
    report = after.cancelled_before
    assert report.status == "cancelled"
    assert report.error["type"] == "KeyboardInterrupt"
    assert report.tool_calls["by_tool"] == {"desk.signal_ready": {"calls": 1, "failures": 0}}
    assert report.sandbox_reset is False
    assert after.hint.startswith("The previous execution was cancelled: Cancelled by the client")
    assert "Variables and files are kept" in after.render_text()


async def test_no_tool_call_starts_after_a_cancel(engine: Codemode, desk: Desk) -> None:
    """Code that swallows the interrupt and calls a tool: the call never reaches the tool."""
    opened = await engine.execute("from servers import desk")
    assert opened.session is not None
    code = (
        "import time\ntry:\n    desk.signal_ready()\n    print('started', flush=True)\n"
        "    time.sleep(120)\nexcept BaseException:\n    pass\n"
        "desk.place_order(item='after the cancel')\n"
    )
    # Cancelled once the code has read signal_ready's reply (it printed after it), so the
    # interrupt is what it swallows. Cancelled while that call is still in flight, the call
    # is abandoned instead: the code swallows its ToolError, and the interrupt then stops it
    # at the refused place_order (a different path, which the other tests cover).
    await _cancel_when_ready(engine, desk, code, opened.session, printed=b"started")
    after = await _next(engine, "print('next')", opened.session)
    assert after.stdout == "next\n", after.render_text()
    assert desk.orders == []
    report = after.cancelled_before
    assert report.refused_after_cancel == 1
    # The code waited for a reply that never came: the grace period ended it.
    assert report.sandbox_reset is True


async def test_a_cancel_abandons_the_tool_call_in_flight(engine: Codemode, desk: Desk) -> None:
    opened = await engine.execute("from servers import desk")
    assert opened.session is not None
    code = "desk.wait_for_release()\nprint('not reached')"
    await _cancel_when_ready(engine, desk, code, opened.session, ready=desk.waiting)
    after = await _next(engine, "print('next')", opened.session)
    # The session answered while the upstream call still waited: the call was abandoned.
    assert not desk.released.is_set()
    desk.release.set()
    assert after.stdout == "next\n", after.render_text()
    report = after.cancelled_before
    assert report.status == "cancelled" and "not reached" not in report.stdout
    assert report.tool_calls["failures"] == 1


async def test_code_that_ignores_the_interrupt_is_stopped_after_the_grace_period(
    engine: Codemode, desk: Desk
) -> None:
    opened = await engine.execute("from servers import desk")
    assert opened.session is not None
    code = (
        "desk.signal_ready()\nimport time\nwhile True:\n    try:\n        time.sleep(120)\n"
        "    except BaseException:\n        pass\n"
    )
    await _cancel_when_ready(engine, desk, code, opened.session)
    after = await _next(engine, "print('alive')", opened.session)
    assert after.status == "ok" and after.stdout == "alive\n"
    assert after.cancelled_before.sandbox_reset is True


async def test_a_guest_without_cpu_after_a_cancel_is_interrupted_not_restarted(
    engine: Codemode, desk: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding: under load two of six cancels restarted the sandbox (variables lost): the
    guest had not been on a CPU to take its interrupt within the grace period. Here the guest
    gets no CPU at all from the cancel on (SIGSTOP) and the grace period is zero, so wall time
    alone would restart it at once; it is waited for, and once it runs again it stops on the
    KeyboardInterrupt and keeps its variables."""
    monkeypatch.setattr("codemode.sandbox.cancel.CANCEL_GRACE_S", 0.0)
    tag = "cm-no-cpu"
    first = await engine.execute(f"open('/proc/self/comm', 'w').write({tag!r})\nx = 41")
    assert first.session is not None
    guest = _pid_named(tag)
    code = (
        "from servers import desk\ndesk.signal_ready()\nprint('started', flush=True)\n"
        "import time\ntime.sleep(120)\nx = 0"
    )
    started = threading.Event()

    def on_output(stream: str, data: bytes) -> None:
        if b"started" in data:
            started.set()  # past its last tool call: nothing unread when the cancel comes

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: engine.execute(code, session=first.session, on_output=on_output)
            )
            assert await anyio.to_thread.run_sync(started.wait, WAIT_S), "never started"
            os.kill(guest, signal.SIGSTOP)  # no CPU for the guest from here
            with anyio.fail_after(WAIT_S):
                while _state(guest) != "T":  # stopped indeed, before the cancel
                    await anyio.sleep(0.001)
            group.cancel_scope.cancel()
        with anyio.fail_after(WAIT_S):
            while _alive(guest) and not _sigint_pending(guest):
                await anyio.sleep(0.01)  # a bounded poll: the host sends its interrupt
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(guest, signal.SIGCONT)
    after = await _next(engine, "print(x + 1)", first.session)
    report = after.cancelled_before
    assert report.sandbox_reset is False, after.render_text()
    assert report.error["type"] == "KeyboardInterrupt"
    assert after.stdout == "42\n", after.render_text()


def _pid_named(tag: str) -> int:
    found = [p.parent.name for p in Path("/proc").glob("[0-9]*/comm") if _read(p) == tag]
    assert len(found) == 1, f"expected one process named {tag!r}, found {found}"
    return int(found[0])


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _state(pid: int) -> str:
    stat = _read(Path(f"/proc/{pid}/stat"))
    return stat[stat.rindex(")") + 2] if stat else "gone"


def _alive(pid: int) -> bool:
    return _state(pid) not in ("Z", "gone")


def _sigint_pending(pid: int) -> bool:
    for line in _read(Path(f"/proc/{pid}/status")).splitlines():
        key, _, value = line.partition(":")
        if key in ("SigPnd", "ShdPnd") and int(value.strip(), 16) & (1 << (signal.SIGINT - 1)):
            return True
    return False


async def test_progress_reports_while_code_runs(engine: Codemode, desk: Desk) -> None:
    reports: list[tuple[float, float | None, str]] = []

    async def progress(value: float, total: float | None, message: str) -> None:
        reports.append((value, total, message))
        if "2 tool call(s)" in message:  # signal_ready done, wait_for_release in flight
            desk.release.set()

    code = "from servers import desk\ndesk.signal_ready()\nprint('waiting', flush=True)\ndesk.wait_for_release()"
    with anyio.fail_after(WAIT_S):
        result = await engine.execute(code, progress=progress)
    assert result.status == "ok", result.render_text()
    assert desk.release.is_set(), f"no report saw the call in flight: {reports}"
    values = [value for value, _, _ in reports]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert "8 bytes printed" in reports[-1][2]


async def test_idle_sessions_give_a_clients_quota_back(engine: Codemode) -> None:
    """Behaviour changed (issue 26): at its quota (2) a client's least recently used idle
    session is checkpointed and released to make room; it restores when used again."""
    # Released, a session keeps the variables it named (as idle release does).
    first = await engine.execute("from state import keep\nx = 41\nkeep('x')", client="alice")
    await engine.execute("pass", client="alice")
    third = await engine.execute("print('third')", client="alice")
    assert third.status == "ok" and third.stdout == "third\n", third.render_text()
    back = await engine.execute("print(x + 1)", session=first.session, client="alice")
    assert back.stdout == "42\n" and back.restored is not None, back.render_text()
    other = await engine.execute("print('bob is served')", client="bob")
    assert other.stdout == "bob is served\n"


async def test_one_client_cannot_take_every_session(engine: Codemode, desk: Desk) -> None:
    """Sessions running code hold a client's quota: the refusal names them and how to free
    them, and another client is served all the same."""
    code = "from servers import desk\ndesk.wait_for_release()"
    registry = engine.registry
    assert registry is not None
    async with anyio.create_task_group() as group:
        for _ in range(2):
            group.start_soon(lambda: engine.execute(code, client="alice"))
        with anyio.fail_after(WAIT_S):
            while list(registry.states(None).values()).count("running") < 2:
                await anyio.sleep(0.01)  # a bounded poll on the registry
        with pytest.raises(SessionQuotaError) as refused:
            await engine.execute("pass", client="alice")
        other = await engine.execute("print('bob is served')", client="bob")
        desk.release.set()
    message = str(refused.value)
    assert "gateway.max_sessions_per_client = 2" in message
    assert message.count("running code") == 2, message
    assert "pass the `session` handle" in message and "cancel" in message
    assert other.stdout == "bob is served\n"


class _SlowBuild:
    """Stands in for a long index build (embedding a large catalog): it ends when released."""

    def __init__(self, engine: Codemode) -> None:
        self.build = engine.searcher._search_index
        self.release = threading.Event()

    def __call__(self) -> Any:
        assert self.release.wait(WAIT_S), "the test never released the build"
        return self.build()


async def test_a_search_during_the_index_build_answers_lexically_at_once(
    engine: Codemode, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = _SlowBuild(engine)
    monkeypatch.setattr(engine.searcher, "_search_index", slow)
    job = engine.build_search_index()
    with anyio.fail_after(WAIT_S):
        early = await engine.search("place an order")
    assert early.lexical_only and "still being built" in early.text
    assert early.hits and early.hits[0]["python_name"] == "desk.place_order"
    slow.release.set()
    with anyio.fail_after(WAIT_S):
        await job
        later = await engine.search("place an order")
    assert not later.lexical_only and "still being built" not in later.text


async def test_a_search_that_waits_for_the_index_reports_progress(
    engine: Codemode, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = _SlowBuild(engine)
    monkeypatch.setattr(engine.searcher, "_search_index", slow)
    messages: list[str] = []

    async def progress(value: float, total: float | None, message: str) -> None:
        messages.append(message)
        if len(messages) == 2:
            slow.release.set()

    with anyio.fail_after(WAIT_S):
        answer = await engine.search("place an order", progress=progress)
    assert not answer.lexical_only and answer.hits
    assert len(messages) >= 2 and all("building the search index" in m for m in messages)


async def test_index_build_progress_carries_stage_and_percentage(
    engine: Codemode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a client sees while its search waits: the build's stage and percentage, as a
    growing value out of 100."""
    slow = _SlowBuild(engine)
    monkeypatch.setattr(engine.searcher, "_search_index", slow)
    heard: list[tuple[str, float]] = []
    engine.index_progress = lambda stage, percent: heard.append((stage, percent))
    reports: list[tuple[float, float | None, str]] = []

    async def progress(value: float, total: float | None, message: str) -> None:
        reports.append((value, total, message))
        if len(reports) == 1:
            engine.note_index_stage("embedding", 40.0)
        elif len(reports) == 3:
            slow.release.set()

    engine.note_index_stage("lexical", 100.0)
    with anyio.fail_after(WAIT_S):
        answer = await engine.search("place an order", progress=progress)
    assert answer.hits
    assert "lexical 100%" in reports[0][2]
    assert "embedding 40%" in reports[1][2]
    values = [value for value, _, _ in reports]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert values[1] == 43.0  # 5% for the lexical stage, then 40% of the other 95
    assert all(total == 100.0 for _, total, _ in reports)
    assert heard[:2] == [("lexical", 100.0), ("embedding", 40.0)]


async def wait_for(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(WAIT_S):
        while not condition():
            await anyio.sleep(0.02)


async def test_a_second_execution_while_one_runs_waits_for_it_and_then_runs(
    engine: Codemode, desk: Desk
) -> None:
    opened = await engine.execute("from servers import desk")
    assert opened.session is not None
    outcome: dict[str, ExecutionResult] = {}

    async def run(name: str, code: str) -> None:
        outcome[name] = await engine.execute(code, session=opened.session)

    async with anyio.create_task_group() as group:
        group.start_soon(run, "first", "desk.wait_for_release()\nprint('first done')")
        assert await anyio.to_thread.run_sync(desk.waiting.wait, WAIT_S), "never started"
        group.start_soon(run, "second", "print(desk.place_order(item='pear'))")
        assert engine.registry is not None
        record = next(r for r in engine.registry.sessions() if r.handle == opened.session)
        await wait_for(lambda: record.busy == 2)  # both checked out: the second has begun
        assert desk.orders == []  # the second waits for the sandbox while the first runs
        desk.release.set()
    assert outcome["first"].stdout == "first done\n", outcome["first"].render_text()
    assert outcome["second"].stdout == "pear\n", outcome["second"].render_text()
    assert record.state is Life.IDLE

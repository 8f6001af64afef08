"""A session's life cycle: every legal move goes where it should, every other one is refused
with ``SessionStateError`` (and leaves the state as it was)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

import pytest

from codemode.engine.life import AFTER_CLOSE, LEGAL, Life
from codemode.engine.session import Session
from codemode.errors import SessionError, SessionStateError
from codemode.policy.approval import ApprovalDecision, ApprovalRequest
from codemode.sandbox.result import ExecutionResult

REQUEST = ApprovalRequest("ap_1", "shop.place_order", {"item": "pear"}, "orders cost money")
DECISION = ApprovalDecision("ap_1", True)
JOB = cast("asyncio.Task[ExecutionResult]", object())  # a stand-in: never awaited here
DONE = ExecutionResult("cancelled", None, "", "", None, {}, {}, 1.0, {}, "")


class FakeSandbox:
    """Only what the life cycle reads: whether the sandbox is released, and release itself."""

    def __init__(self) -> None:
        self.released = False
        self.releases = 0

    def release(self, still_idle: Callable[[], bool]) -> bool:
        self.releases += 1
        if not still_idle():
            return False
        self.released = True
        return True

    def close(self) -> None: ...


class FakeChain:
    privacy = None

    def close(self) -> None: ...


def session() -> Session:
    return Session("s_life", None, cast(Any, FakeSandbox()), cast(Any, FakeChain()))


# How to bring a fresh session into each state, by legal moves only.
def into(state: Life) -> Session:
    record = session()
    if state is Life.IDLE:
        return record
    if state is Life.RELEASED:
        assert record.release(lambda: True)
        return record
    if state is Life.CLOSED:
        record.close()
        return record
    record.begin("x = 1")
    if state is Life.PAUSED:
        record.pause(JOB, REQUEST)
    elif state is Life.CANCELLED:
        record.cancel()
    return record


MOVES: dict[str, Callable[[Session], object]] = {
    "begin": lambda record: record.begin("print(1)"),
    "pause": lambda record: record.pause(JOB, REQUEST),
    "resume": lambda record: record.resume(DECISION),
    "complete": lambda record: record.complete(),
    "cancel": lambda record: record.cancel(),
}

# Where each legal move leads.
LEADS = {
    ("begin", Life.IDLE): Life.RUNNING,
    ("begin", Life.RELEASED): Life.RUNNING,
    ("begin", Life.CANCELLED): Life.RUNNING,
    ("begin", Life.RUNNING): Life.RUNNING,  # it waits for the sandbox
    ("pause", Life.RUNNING): Life.PAUSED,
    ("resume", Life.PAUSED): Life.RUNNING,
    ("complete", Life.RUNNING): Life.IDLE,
    ("cancel", Life.RUNNING): Life.CANCELLED,
}


def test_the_table_names_every_legal_move() -> None:
    assert {(move, start) for move in MOVES for start in LEGAL[move]} == set(LEADS)


@pytest.mark.parametrize(("move", "start"), sorted(LEADS, key=str))
def test_each_legal_move_goes_where_it_should(move: str, start: Life) -> None:
    record = into(start)
    assert record.state is start
    MOVES[move](record)
    assert record.state is LEADS[(move, start)]


# An execution's own reports may come after its session was closed under it: ignored.
LATE = [(move, Life.CLOSED) for move in sorted(AFTER_CLOSE & set(MOVES))]
ILLEGAL = [
    (move, start)
    for move in MOVES
    for start in Life
    if (move, start) not in LEADS and (move, start) not in LATE
]


@pytest.mark.parametrize(("move", "start"), ILLEGAL, ids=[f"{m}-{s.value}" for m, s in ILLEGAL])
def test_each_illegal_move_is_refused_and_changes_nothing(move: str, start: Life) -> None:
    record = into(start)
    with pytest.raises(SessionStateError) as refused:
        MOVES[move](record)
    assert refused.value.state == start.value
    assert f"cannot {move}" in refused.value.message and refused.value.fix
    assert record.state is start


@pytest.mark.parametrize(("move", "start"), LATE, ids=[m for m, _ in LATE])
def test_an_executions_late_report_after_a_close_changes_nothing(move: str, start: Life) -> None:
    record = into(start)
    MOVES[move](record)
    assert record.state is Life.CLOSED and record.paused is None


def test_a_paused_session_says_which_approval_it_waits_for() -> None:
    record = into(Life.PAUSED)
    assert record.paused is JOB
    with pytest.raises(SessionError, match=r"waiting for an approval \(ap_1\)"):
        record.begin("print(2)")
    with pytest.raises(SessionStateError, match="on approval 'ap_1', not this one"):
        record.resume(ApprovalDecision("ap_2", True))
    assert record.state is Life.PAUSED
    assert record.resume(DECISION) is JOB and record.paused is None


def test_cancel_sets_the_executions_stop_signal() -> None:
    record = session()
    signal = record.begin("while True: pass")
    assert record.cancel_event is signal and not signal.is_set()
    record.cancel()
    assert signal.is_set()


def test_a_cancelled_execution_that_stopped_is_reported_once_and_the_session_is_idle() -> None:
    record = into(Life.CANCELLED)
    record.stopped(DONE)
    assert record.state is Life.IDLE
    assert record.take_cancelled() is DONE and record.take_cancelled() is None


def test_the_next_execution_may_begin_before_the_cancelled_one_stopped() -> None:
    record = into(Life.CANCELLED)
    record.begin("print('next')")
    record.stopped(DONE)  # the cancelled one ends while the next waits for the sandbox
    assert record.state is Life.RUNNING
    record.complete()
    assert record.state is Life.IDLE and record.take_cancelled() is DONE


def test_executions_that_overlap_are_counted() -> None:
    record = into(Life.RUNNING)
    record.begin("print('second')")  # waits for the sandbox while the first runs
    record.complete()
    assert record.state is Life.RUNNING  # the second still runs
    record.complete()
    assert record.state is Life.IDLE
    with pytest.raises(SessionStateError, match="cannot complete"):
        record.complete()


def test_a_queued_execution_may_be_cancelled_while_the_first_waits_for_an_approval() -> None:
    record = into(Life.RUNNING)
    second = record.begin("print('second')")
    record.pause(JOB, REQUEST)
    record.cancel(second)  # the second one's caller gave up: the paused one is untouched
    assert second.is_set() and record.state is Life.PAUSED
    assert record.resume(DECISION) is JOB and record.state is Life.RUNNING
    record.complete()
    assert record.state is Life.CANCELLED  # the second is still stopping
    record.stopped(DONE)
    assert record.state is Life.IDLE and record.take_cancelled() is DONE


def test_a_paused_execution_alone_cannot_complete_or_be_cancelled() -> None:
    record = into(Life.PAUSED)
    for move in ("complete", "cancel"):
        with pytest.raises(SessionStateError, match=f"cannot {move}: it is paused"):
            MOVES[move](record)
    assert record.state is Life.PAUSED and not record.cancel_event.is_set()  # type: ignore[union-attr]


def test_stopped_without_a_cancel_is_refused() -> None:
    for start in (Life.IDLE, Life.RUNNING):
        with pytest.raises(SessionStateError, match="cannot end a cancelled execution"):
            into(start).stopped(DONE)


def test_release_only_from_idle() -> None:
    record = session()
    assert record.release(lambda: True) and record.state is Life.RELEASED
    assert not record.release(lambda: True)  # nothing left to release
    busy = into(Life.RUNNING)
    assert not busy.release(lambda: True)  # an execution came in: not released
    assert cast(FakeSandbox, busy.sandbox).releases == 0
    for start in (Life.PAUSED, Life.CLOSED):
        with pytest.raises(SessionStateError, match="cannot release"):
            into(start).release(lambda: True)


def test_a_closed_session_ignores_a_late_stop_and_refuses_everything_else() -> None:
    record = into(Life.CANCELLED)
    record.close()
    record.stopped(DONE)  # the code stopped after the close: nothing to report to
    assert record.state is Life.CLOSED and record.take_cancelled() is None
    with pytest.raises(SessionStateError, match="it is closed"):
        record.begin("print(3)")


class FakePrivacy:
    def __init__(self) -> None:
        self.dropped = 0

    def drop_caches(self) -> None:
        self.dropped += 1


def test_a_released_session_lets_go_of_its_privacy_caches_and_keeps_them_otherwise() -> None:
    chain = FakeChain()
    privacy = chain.privacy = cast(Any, FakePrivacy())
    record = Session("s_life", None, cast(Any, FakeSandbox()), cast(Any, chain))
    assert not record.release(lambda: False)  # not idle any more: nothing released
    assert privacy.dropped == 0
    assert record.release(lambda: True)
    assert privacy.dropped == 1

"""The runner looks at the bridge without sleeping for a moment, only while a CPU is spare."""

from __future__ import annotations

import selectors
import socket
from collections.abc import Iterator

import pytest

from codemode.sandbox import SandboxSession
from codemode.sandbox.spin import (
    SPIN_MAX_S,
    SPIN_MIN_S,
    SPIN_S,
    SpareCpu,
    SpinBudget,
    runnable_tasks,
    spin_until_ready,
)
from codemode.testing import ManualClock


def test_a_cpu_is_spare_while_fewer_tasks_are_runnable_than_cpus() -> None:
    runnable = [1]
    clock = ManualClock(100.0)
    spare = SpareCpu(runnable=lambda: runnable[0], cpus=lambda: 2, clock=clock)
    assert spare()
    runnable[0] = 5
    assert spare(), "the count is read at most every 0.1 s"
    clock.now += 0.2
    assert not spare()
    runnable[0] = 1
    clock.now += 0.005
    assert not spare(), "a busy reading holds for 10 ms"
    clock.now += 0.006
    assert spare(), "and is read again after 10 ms, not 0.1 s"
    assert not SpareCpu(runnable=lambda: 1, cpus=lambda: 1, clock=clock)(), "one CPU: never"


def test_an_unreadable_count_means_no_spare_cpu() -> None:
    def unreadable() -> int:
        raise OSError("no /proc/loadavg")

    assert not SpareCpu(runnable=unreadable, cpus=lambda: 8, clock=ManualClock(100.0))()


def test_the_count_of_runnable_tasks_includes_the_reader() -> None:
    assert runnable_tasks() >= 1


class CountingSelector(selectors.DefaultSelector):
    def __init__(self) -> None:
        super().__init__()
        self.looks = 0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self.looks += 1
        return super().select(timeout)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair()
    yield left, right
    left.close()
    right.close()


def test_the_spin_ends_as_soon_as_the_bridge_is_ready(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    with CountingSelector() as selector:
        selector.register(pair[0], selectors.EVENT_READ)
        pair[1].send(b"done")
        assert spin_until_ready(selector, seconds=3600)
        assert selector.looks == 1


def test_the_spin_gives_up_after_its_time(pair: tuple[socket.socket, socket.socket]) -> None:
    with CountingSelector() as selector:
        selector.register(pair[0], selectors.EVENT_READ)
        assert not spin_until_ready(selector, seconds=0.0)
        assert selector.looks == 1


def test_output_ready_first_is_taken_and_the_spin_goes_on_for_the_bridge(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    output_read, output_write = socket.socketpair()
    taken: list[bytes] = []

    def take(data: object) -> bool:
        if data != "stdout":
            return False
        chunk = output_read.recv(100)
        taken.append(chunk)
        if len(taken) == 2:  # the guest answers just after flushing its output
            pair[1].send(b"done")
        return True

    with output_read, output_write, CountingSelector() as selector:
        selector.register(pair[0], selectors.EVENT_READ, "sock")
        selector.register(output_read, selectors.EVENT_READ, "stdout")
        output_write.send(b"2\n")
        assert not spin_until_ready(selector, seconds=0.0, take=take), "output alone: no answer"
        assert taken == [b"2\n"]
        output_write.send(b"3\n")
        assert spin_until_ready(selector, seconds=3600, take=take)
        assert taken == [b"2\n", b"3\n"] and selector.looks == 3
        assert pair[0].recv(10) == b"done", "the answer is left to the caller"


def test_the_spin_follows_the_sandboxs_recent_answers() -> None:
    budget = SpinBudget()
    assert budget.seconds() == SPIN_S, "before any answer: the default"
    for _ in range(8):
        budget.answered(200e-6)
    assert budget.seconds() == pytest.approx(300e-6), "1.5 times the median answer"
    for _ in range(8):
        budget.answered(20e-6)
    assert budget.seconds() == SPIN_MIN_S, "never below the floor"
    for _ in range(4):
        budget.answered(330e-6)
    assert budget.seconds() == pytest.approx(1.5 * (20e-6 + 330e-6) / 2), "the last 8 count"
    for _ in range(8):
        budget.answered(400e-6)  # within reach of the longest spin, 1.5 times beyond it
    assert budget.seconds() == SPIN_MAX_S, "capped"


def test_answers_slower_than_the_longest_spin_mean_no_spin() -> None:
    budget = SpinBudget()
    for _ in range(5):
        budget.answered(0.05)  # executions that run for 50 ms: a spin would only hold the GIL
    assert budget.seconds() == 0.0
    for _ in range(8):
        budget.answered(100e-6)  # quick ones again
    assert budget.seconds() == pytest.approx(150e-6)


def test_a_sandbox_whose_executions_run_long_stops_spinning(session: SandboxSession) -> None:
    """The runner records each answer: after executions of 20 ms it spins no more (it would
    hold the CPU and the GIL for nothing), and quick ones count again."""
    for _ in range(5):
        assert session.execute("import time; time.sleep(0.02)").status == "ok"
    sandbox = session.sandbox
    assert sandbox is not None
    assert sandbox._spin.seconds() == 0.0
    for _ in range(8):
        assert session.execute("x = 1").status == "ok"
    typical = sandbox._spin.typical
    # How soon a trivial execution answers unspun depends on the machine; that it is
    # sooner than a sleep of 20 ms does not.
    assert typical is not None and typical < 0.02


def test_no_spin_while_no_cpu_is_spare_and_no_question_when_none_is_due() -> None:
    answers = [False, True, True]
    asked: list[bool] = []

    def spare() -> bool:
        asked.append(answers[len(asked)])
        return asked[-1]

    budget = SpinBudget(spare)
    assert budget.seconds_now() == 0.0
    assert budget.seconds_now() == SPIN_S
    for _ in range(5):
        budget.answered(0.05)
    assert budget.seconds_now() == 0.0
    assert asked == [False, True], "a budget of 0 asks nothing (a read of /proc/loadavg)"

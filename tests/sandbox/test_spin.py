"""The runner looks at the bridge without sleeping for a moment, only while a CPU is spare."""

from __future__ import annotations

import selectors
import socket
from collections.abc import Iterator

import pytest

from codemode.sandbox.spin import SpareCpu, runnable_tasks, spin_until_ready
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

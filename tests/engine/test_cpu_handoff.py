"""Moving a sleeping worker to the caller's CPU, and giving it every CPU back."""

from __future__ import annotations

import os
import threading

import pytest

from codemode.engine import cpu_handoff
from codemode.engine.cpu_handoff import CallerCpu
from codemode.engine.threads import WorkerThreads

pytestmark = pytest.mark.anyio

ALLOWED = frozenset(os.sched_getaffinity(0))


def sleeping_thread() -> tuple[threading.Thread, threading.Event, list[object]]:
    """A thread asleep until the event is set; it then restores itself and notes its CPUs."""
    wake, seen = threading.Event(), []
    started = threading.Event()

    def sleep() -> None:
        seen.append(threading.get_native_id())
        started.set()
        wake.wait(10)
        CallerCpu().restore(ALLOWED)
        seen.append(frozenset(os.sched_getaffinity(0)))

    thread = threading.Thread(target=sleep)
    thread.start()
    assert started.wait(10)
    return thread, wake, seen


def test_a_sleeping_thread_is_moved_to_the_callers_cpu_and_takes_all_back():
    thread, wake, seen = sleeping_thread()
    native_id = seen[0]
    assert isinstance(native_id, int)
    moved = CallerCpu(spare=lambda: True).move_to_caller(native_id, ALLOWED)
    if len(ALLOWED) < 2:  # one CPU: there is nowhere else it could be woken
        assert not moved
    else:
        assert moved
        (cpu,) = os.sched_getaffinity(native_id)
        assert cpu in ALLOWED
    wake.set()
    thread.join(10)
    assert seen[1] == ALLOWED


def test_nothing_moves_on_a_busy_machine():
    thread, wake, seen = sleeping_thread()
    assert isinstance(seen[0], int)
    assert not CallerCpu(spare=lambda: False).move_to_caller(seen[0], ALLOWED)
    assert frozenset(os.sched_getaffinity(seen[0])) == ALLOWED
    wake.set()
    thread.join(10)


@pytest.mark.parametrize(
    ("error", "tried"),
    [
        (PermissionError(1, "Operation not permitted"), [123]),  # refused: not tried again
        (ProcessLookupError(3, "No such process"), [123, 124]),  # the thread was gone
    ],
)
def test_a_refusal_stops_further_tries_a_thread_gone_meanwhile_does_not(
    monkeypatch: pytest.MonkeyPatch, error: OSError, tried: list[int]
):
    calls = []

    def fail(pid: int, cpus: object) -> None:
        calls.append(pid)
        raise error

    handoff = CallerCpu(spare=lambda: True)
    monkeypatch.setattr(cpu_handoff.os, "sched_setaffinity", fail)
    monkeypatch.setattr(cpu_handoff, "_sched_getcpu", lambda: lambda: 0)
    assert not handoff.move_to_caller(123, frozenset({0, 1}))
    assert not handoff.move_to_caller(124, frozenset({0, 1}))
    assert calls == tried


async def test_a_job_and_what_it_starts_get_every_cpu_after_a_move():
    workers = WorkerThreads(1, handoff=CallerCpu(spare=lambda: True))
    await workers.run(lambda: None)  # the next job is handed to this now idle thread

    def child_cpus() -> tuple[frozenset[int], frozenset[int]]:
        box: list[frozenset[int]] = []
        child = threading.Thread(target=lambda: box.append(frozenset(os.sched_getaffinity(0))))
        child.start()
        child.join(10)
        return frozenset(os.sched_getaffinity(0)), box[0]

    for _ in range(5):
        assert await workers.run(child_cpus) == (ALLOWED, ALLOWED)
    workers.close()

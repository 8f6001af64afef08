"""The watchdog ticks while executions come and go, sleeps after a quiet spell, and checks
every execution within one interval of its start either way."""

from __future__ import annotations

import threading
import time

from codemode.sandbox.watchdog import Watchdog


class CountingWatched:
    """A watched execution that counts its checks (the watchdog only calls ``check``)."""

    def __init__(self) -> None:
        self.checked = threading.Event()
        self.checks = 0

    def check(self) -> str | None:
        self.checks += 1
        self.checked.set()
        return None


def test_a_watched_execution_is_checked_and_then_the_thread_sleeps() -> None:
    dog = Watchdog(interval_s=0.005, quiet_ticks=3)
    first = CountingWatched()
    dog.watch(first)  # type: ignore[arg-type]
    assert first.checked.wait(10), "never checked"
    dog.unwatch(first)  # type: ignore[arg-type]
    # After three quiet ticks the thread sleeps until a watch wakes it.
    deadline = time.monotonic() + 10
    while not dog._idle and time.monotonic() < deadline:
        time.sleep(0.001)
    assert dog._idle, "the thread kept ticking with nothing to watch"
    second = CountingWatched()
    dog.watch(second)  # type: ignore[arg-type]
    assert second.checked.wait(10), "a watch did not wake the sleeping thread"
    dog.unwatch(second)  # type: ignore[arg-type]


def test_while_ticking_a_watch_is_checked_without_a_wake_up() -> None:
    dog = Watchdog(interval_s=0.005, quiet_ticks=10**9)  # never sleeps
    first = CountingWatched()
    dog.watch(first)  # type: ignore[arg-type]
    assert first.checked.wait(10)
    dog.unwatch(first)  # type: ignore[arg-type]
    assert not dog._idle
    notified: list[int] = []
    notify = dog._cond.notify_all

    def counted_notify() -> None:
        notified.append(1)
        notify()

    dog._cond.notify_all = counted_notify  # type: ignore[method-assign]
    second = CountingWatched()
    dog.watch(second)  # type: ignore[arg-type]
    assert second.checked.wait(10), "the ticking thread never checked the new execution"
    dog.unwatch(second)  # type: ignore[arg-type]
    assert notified == [], "a watch woke a thread that was ticking anyway"

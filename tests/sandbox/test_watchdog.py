"""The watchdog ticks while executions come and go, sleeps after a quiet spell, and checks
every execution within one interval of its start either way; an execution's watch ends with it,
so a tick that took it up late never kills the sandbox during the next execution."""

from __future__ import annotations

import threading
import time

from codemode.sandbox.meter import Usage
from codemode.sandbox.watchdog import Watchdog, Watched
from codemode.settings.sandbox import Limits


class CountingWatched:
    """A watched execution that counts its checks (the watchdog only calls ``check``)."""

    def __init__(self) -> None:
        self.checked = threading.Event()
        self.checks = 0

    def check(self) -> str | None:
        self.checks += 1
        self.checked.set()
        return None

    def end(self) -> None:
        pass


class OverLimitMeter:
    """A sandbox's meter (the calls ``Watched`` makes) whose memory is past any limit: as a
    sandbox reads while its next execution fills it."""

    def __init__(self) -> None:
        self.readings = 0
        self.kills = 0

    def cpu_seconds(self) -> float:
        return 0.0

    def usage(self) -> Usage:
        self.readings += 1
        return Usage(
            cpu_seconds=0.0,
            tasks=1,
            memory_bytes=1 << 40,
            processes_hit=False,
            memory_hit=False,
            workspace_inodes=0,
        )

    def kill(self) -> None:
        self.kills += 1


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


def test_a_watch_that_ended_reads_nothing_and_kills_nothing() -> None:
    """A check the watchdog took up for an execution that ended meanwhile (its tick listed the
    execution, then waited for the GIL) finds the sandbox in its next execution: it must not
    kill the sandbox under the ended one's name."""
    meter = OverLimitMeter()
    ended = Watched(meter, Limits())  # type: ignore[arg-type]
    Watchdog(interval_s=3600).unwatch(ended)  # as the runner does when its execution ends
    assert ended.check() is None
    assert (meter.readings, meter.kills) == (0, 0)
    # The same meter while the execution runs: a breach, recorded, and the sandbox killed.
    running = Watched(meter, Limits())  # type: ignore[arg-type]
    assert running.check() == "memory"
    assert (running.breach, meter.kills) == ("memory", 1)
    running.end()
    assert running.check() == "memory", "the breach is kept for the result"
    assert (meter.readings, meter.kills) == (1, 1)


def test_ending_a_watch_waits_for_the_check_under_way() -> None:
    """``end`` returns only once a check that began before it has finished: the runner's next
    execution cannot start while a check of the last one still reads the sandbox."""
    reading = threading.Event()
    release = threading.Event()

    class SlowMeter(OverLimitMeter):
        def usage(self) -> Usage:
            reading.set()
            release.wait(10)
            return super().usage()

    meter = SlowMeter()
    watched = Watched(meter, Limits())  # type: ignore[arg-type]
    checker = threading.Thread(target=watched.check)
    checker.start()
    assert reading.wait(10)
    ended = threading.Event()
    ender = threading.Thread(target=lambda: (watched.end(), ended.set()))
    ender.start()
    assert not ended.wait(0.2), "end() returned while a check was reading the sandbox"
    release.set()
    assert ended.wait(10)
    checker.join(10)
    ender.join(10)
    assert watched.breach == "memory" and meter.kills == 1

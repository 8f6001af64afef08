"""Sessions of ended connections are released once the gateway is quiet, not mid-burst."""

from __future__ import annotations

import threading

from codemode.gateway.quiet_releases import MAX_QUEUED, MAX_WAIT_S, QUIET_S, QuietReleases

WAIT_S = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def queue(clock: Clock) -> tuple[QuietReleases, list[str]]:
    released: list[str] = []
    releases = QuietReleases(released.append, clock=clock)
    releases._thread = threading.Thread()  # the test takes them itself: no thread of its own
    return releases, released


def test_a_release_waits_until_nothing_happened_for_a_while() -> None:
    clock = Clock()
    releases, _ = queue(clock)
    releases.add("s_a")
    clock.now += QUIET_S / 2
    assert releases.take_due() == []
    releases.touch()  # an execution began: the burst goes on
    clock.now += QUIET_S * 0.9
    assert releases.take_due() == []
    releases.add("s_b")
    releases.add("s_a")  # each handle once, in order
    clock.now += QUIET_S
    assert releases.take_due() == ["s_a", "s_b"]
    assert releases.pending == 0 and releases.take_due() == []


def test_a_burst_that_never_ends_delays_releases_by_a_second_at_most() -> None:
    clock = Clock()
    releases, _ = queue(clock)
    releases.add("s_first")
    start = clock.now
    while clock.now - start < MAX_WAIT_S - QUIET_S:
        clock.now += QUIET_S / 2
        releases.touch()
        assert releases.take_due() == []
    clock.now = start + MAX_WAIT_S
    releases.touch()
    assert releases.take_due() == ["s_first"]


def test_a_long_queue_is_released_at_once() -> None:
    clock = Clock()
    releases, _ = queue(clock)
    for number in range(MAX_QUEUED - 1):
        releases.add(f"s_{number}")
    assert releases.take_due() == []
    releases.add("s_last")
    assert len(releases.take_due()) == MAX_QUEUED


def test_the_thread_releases_them_and_survives_a_failing_release() -> None:
    done = threading.Event()
    seen: list[str] = []

    def release(handle: str) -> None:
        seen.append(handle)
        if handle == "s_bad":
            raise RuntimeError("the checkpoint could not be written")
        done.set()

    releases = QuietReleases(release)
    releases.add("s_bad")
    releases.add("s_good")
    assert done.wait(WAIT_S), "nothing was released"
    assert seen == ["s_bad", "s_good"]
    done.clear()
    releases.add("s_later")
    assert done.wait(WAIT_S) and seen[-1] == "s_later"
    releases.close()
    assert releases._thread is not None
    releases._thread.join(WAIT_S)
    assert not releases._thread.is_alive()
    releases.add("s_after_close")
    assert releases.pending == 0

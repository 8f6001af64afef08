"""The adaptive warm pool: grows with arrivals, never past its memory bound, shrinks back;
several starter threads start sandboxes at once."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator

import pytest

from codemode.sandbox import Limits, SandboxPool, SandboxSettings
from codemode.sandbox.backends import make_backend
from codemode.sandbox.demand import MiB, WarmTarget, warm_target
from codemode.testing import ManualClock


def target(clock: ManualClock, **changes) -> WarmTarget:
    options = {
        "ceiling": 10,
        "window_s": 10.0,
        "sandbox_bytes": 10 * MiB,
        "memory_budget_bytes": 60 * MiB,
        "available": lambda: 8 << 30,
        "clock": clock,
    }
    options.update(changes)
    return WarmTarget(2, **options)


def test_the_target_follows_recent_arrivals_and_falls_back_to_the_floor():
    clock = ManualClock()
    warm = target(clock)
    assert warm.size() == 2
    for _ in range(5):
        warm.arrived()
    assert warm.size() == 5
    clock.now += 11  # the burst has passed out of the window
    assert warm.size() == 2


def test_growth_stops_at_the_ceiling_and_at_the_memory_budget():
    clock = ManualClock()
    by_memory = target(clock)
    by_ceiling = target(clock, ceiling=4, memory_budget_bytes=1 << 40)
    for _ in range(30):
        by_memory.arrived()
        by_ceiling.arrived()
    assert by_memory.size() == 6  # 60 MiB / 10 MiB
    assert by_ceiling.size() == 4


def test_a_quarter_of_the_available_memory_caps_growth_too():
    clock = ManualClock()
    warm = target(clock, available=lambda: 120 * MiB, memory_budget_bytes=1 << 40)
    for _ in range(30):
        warm.arrived()
    assert warm.size() == 3  # 120 MiB / 4 / 10 MiB


def test_the_target_never_exceeds_its_memory_bound_under_random_traffic():
    generator = random.Random(7)
    clock = ManualClock()
    for _ in range(200):
        budget = generator.randrange(0, 200) * MiB
        available = generator.randrange(0, 800) * MiB
        warm = target(
            clock,
            memory_budget_bytes=budget,
            available=lambda available=available: available,
            ceiling=generator.randrange(0, 40),
        )
        bound = max(warm.floor, min(budget, available // 4) // warm.sandbox_bytes)
        for _ in range(generator.randrange(0, 60)):
            clock.now += generator.random()
            warm.arrived()
            assert warm.floor <= warm.size() <= bound


def test_a_fixed_pool_is_the_default():
    assert warm_target(2, 0, 256).size() == 2
    assert not WarmTarget(3).adaptive and WarmTarget(3).size() == 3


@pytest.fixture
def settings() -> SandboxSettings:
    # Honest code only: these tests count sandboxes, they run nothing hostile.
    return SandboxSettings(limits=Limits(wall_time_s=10), pool_size=1, unsafe_no_isolation=True)


@pytest.fixture
def adaptive_pool(settings: SandboxSettings) -> Iterator[tuple[SandboxPool, ManualClock]]:
    clock = ManualClock()
    warm = WarmTarget(
        1,
        ceiling=10,
        window_s=0.2,
        sandbox_bytes=10 * MiB,
        memory_budget_bytes=30 * MiB,
        available=lambda: 8 << 30,
        clock=clock,
    )
    with SandboxPool(make_backend(settings), 1, starters=3, target=warm).start() as pool:
        yield pool, clock


def wait_until(condition, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_the_pool_grows_after_a_burst_within_its_bound_then_shrinks(adaptive_pool):
    pool, clock = adaptive_pool
    assert pool.wait_full(60)
    taken = [pool.acquire() for _ in range(6)]
    most = 0

    def settled() -> bool:
        nonlocal most
        most = max(most, pool.ready_count)
        return pool.ready_count == 3

    wait_until(settled)  # 30 MiB / 10 MiB, although 6 arrived
    assert most <= 3
    clock.now += 1  # the burst is over
    wait_until(lambda: pool.ready_count == 1)
    for sandbox in taken:
        sandbox.kill()


def test_several_starters_serve_simultaneous_requests(settings):
    before = set(threading.enumerate())
    with SandboxPool(make_backend(settings), 0, starters=3).start() as pool:
        starters = [t for t in set(threading.enumerate()) - before if "sandbox-pool" in t.name]
        assert len(starters) == 3
        got: list[object] = []
        threads = [threading.Thread(target=lambda: got.append(pool.acquire())) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert len(got) == 6 and len({id(s) for s in got}) == 6
    assert not [t for t in starters if t.is_alive()]


def test_a_refill_waits_for_the_burst_to_pass_while_the_pool_holds_enough(settings, monkeypatch):
    """Taking one of four ready sandboxes starts no other while sandboxes are being taken
    (``REFILL_SETTLE_S``, made long here); once the burst has passed the pool refills."""
    from codemode.sandbox import pool as pool_module

    monkeypatch.setattr(pool_module, "REFILL_SETTLE_S", 2.0)  # far beyond the look at 0.3 s
    with SandboxPool(make_backend(settings), 4, starters=2).start() as pool:
        assert pool.wait_full(60)
        taken = pool.acquire()
        time.sleep(0.3)
        with pool._cond:
            assert len(pool._ready) == 3 and pool._starting == 0, "a start began in the burst"
        wait_until(lambda: pool.ready_count == 4)
        taken.kill()


def test_a_pool_running_low_or_a_waiting_caller_starts_at_once(settings, monkeypatch):
    """The wait is only for sandboxes to spare: a caller that finds none ready gets one
    started at once, and with less than a quarter of the target left the queue is topped up
    to that quarter at once (the settle time here is far longer than the test may take)."""
    from codemode.sandbox import pool as pool_module

    monkeypatch.setattr(pool_module, "REFILL_SETTLE_S", 600.0)
    with SandboxPool(make_backend(settings), 8, starters=2).start() as pool:
        assert pool.wait_full(60)
        taken = [pool.acquire() for _ in range(8)]
        taken.append(pool.acquire())  # none was ready: started for this caller
        wait_until(lambda: pool.ready_count == 2, timeout_s=60)  # a quarter of 8
        time.sleep(0.3)
        assert pool.ready_count == 2, "more than a quarter started while sandboxes were taken"
        for sandbox in taken:
            sandbox.kill()


def test_a_full_pool_is_one_that_will_start_nothing_more(adaptive_pool, monkeypatch):
    """``wait_full`` (what tests wait for before they count processes) waits for the starts a
    refill holds back while sandboxes are taken, not only for ``size`` ready: a start begun
    after it returned was counted as a process left behind."""
    from codemode.sandbox import pool as pool_module

    monkeypatch.setattr(pool_module, "REFILL_SETTLE_S", 0.5)
    pool, _clock = adaptive_pool  # the clock stands still: the arrivals stay in the window
    assert pool.wait_full(60)
    taken = [pool.acquire() for _ in range(3)]  # the target is 3 now
    assert pool.wait_full(60)
    with pool._cond:
        assert len(pool._ready) == 3 and pool._starting == 0
    for sandbox in taken:
        sandbox.kill()


def test_a_sandbox_stopped_while_its_starter_waits_says_so(settings):
    """Closing the pool kills the sandboxes its starter threads are waiting for, and with them
    their selectors: the waiting thread then gets a SandboxError it handles (once an OSError
    escaped from it and ended the thread with an unhandled exception)."""
    from codemode.errors import SandboxError
    from codemode.sandbox.runner import Sandbox

    backend = make_backend(settings)
    sandbox = Sandbox(backend.spawn(), backend.limits)
    sandbox.kill()  # what close() does from another thread
    with pytest.raises(SandboxError, match="stopped while it started"):
        sandbox.wait_ready(10)


class _Started:
    """A stand-in for a started sandbox: the pool only asks whether it lives and kills it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dead = False
        self.process = self

    def alive(self) -> bool:
        return not self.dead

    def kill(self) -> None:
        self.dead = True


class GatedPool(SandboxPool):
    """Each start finishes only when the test opens its gate, in whatever order it chooses."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.begun: list[tuple[threading.Event, _Started]] = []
        self.changed = threading.Condition()

    def _spawn_here(self):
        gate, sandbox = threading.Event(), _Started(f"start {len(self.begun) + 1}")
        with self.changed:
            self.begun.append((gate, sandbox))
            self.changed.notify_all()
        assert gate.wait(60), "the test never opened this start's gate"
        return sandbox

    def wait_begun(self, count: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.begun) >= count, 60)


def test_a_waiting_caller_takes_the_first_start_that_finishes_not_only_its_own(settings):
    """A burst's callers must not wait for the start begun for each of them while a start
    begun to refill the pool is ready: the first one that finishes serves the oldest caller."""
    pool = GatedPool(make_backend(settings), 1, starters=2).start()
    try:
        pool.wait_begun(1)  # refilling the pool to its one sandbox
        got: list[object] = []
        caller = threading.Thread(target=lambda: got.append(pool.acquire()))
        caller.start()
        pool.wait_begun(2)  # one more start for the caller who found the pool empty
        refill, for_caller = pool.begun
        refill[0].set()
        caller.join(60)
        assert got == [refill[1]], "the caller still waits although a sandbox is ready"
        for_caller[0].set()  # it refills the pool instead
        wait_until(lambda: pool.ready_count == 1)
    finally:
        for gate, _ in pool.begun:
            gate.set()
        pool.close()


def test_an_idle_pool_falls_to_its_idle_floor_and_back_on_the_next_arrival():
    clock = ManualClock()
    warm = target(clock, idle_after_s=50.0, idle_floor=0)
    assert warm.size() == 2, "a new pool holds its floor"
    clock.now += 49
    assert warm.size() == 2
    clock.now += 1
    assert warm.size() == 0, "nothing taken for idle_after_s"
    warm.arrived()
    assert warm.size() == 2
    assert warm.recheck_s == 10.0 and target(clock, idle_after_s=3.0).recheck_s == 3.0
    fixed = WarmTarget(2, idle_after_s=30.0, clock=clock)
    assert not fixed.adaptive and fixed.recheck_s == 30.0
    assert WarmTarget(2).recheck_s is None, "a fixed pool without idle floor never looks again"
    assert WarmTarget(1, idle_after_s=5.0, idle_floor=3).idle_floor == 1, "never above the floor"


def test_a_connecting_client_wakes_an_idle_target_without_asking_for_growth():
    clock = ManualClock()
    warm = target(clock, idle_after_s=50.0, idle_floor=0)
    clock.now += 50
    assert warm.size() == 0
    assert warm.wake(), "it says it was idle"
    assert not warm.wake(), "awake already"
    assert warm.size() == 2, "the floor holds again"
    assert warm.recent() == 0, "a wake is no arrival: the target does not grow"
    clock.now += 50
    assert warm.size() == 0, "idle again after as long with nothing taken"


def test_an_idle_pool_refills_to_its_floor_when_a_session_is_announced(settings):
    clock = ManualClock()
    warm = WarmTarget(1, idle_after_s=0.2, idle_floor=0, clock=clock)
    with SandboxPool(make_backend(settings), 1, target=warm).start() as pool:
        assert pool.wait_full(60)
        pool.expect()  # warm already: nothing more starts
        assert pool.wait_full(60) and pool.ready_count == 1
        clock.now += 1
        wait_until(lambda: pool.ready_count == 0)
        pool.expect()  # before any session asks
        wait_until(lambda: pool.ready_count == 1)
        assert warm.recent() == 0
        assert pool.wait_full(60) and pool.ready_count == 1


def test_an_announced_session_wakes_starters_that_would_sleep_until_their_next_look(settings):
    clock = ManualClock()
    warm = WarmTarget(1, idle_after_s=30.0, idle_floor=0, clock=clock)
    clock.now += 31  # idle before the pool starts: its starters look again in 30 s
    with SandboxPool(make_backend(settings), 1, target=warm).start() as pool:
        assert pool.wait_full(60) and pool.ready_count == 0
        pool.expect()
        wait_until(lambda: pool.ready_count == 1, timeout_s=10.0)


class _ForkingBackend:
    template = object()


class _StartingBackend:
    template = None


def test_only_a_pool_whose_sandboxes_fork_from_a_template_empties_when_idle(settings):
    forks = SandboxPool.from_settings(_ForkingBackend(), settings, idle_after_s=50.0)  # type: ignore[arg-type]
    starts = SandboxPool.from_settings(_StartingBackend(), settings, idle_after_s=50.0)  # type: ignore[arg-type]
    assert forks.target.idle_floor == 0 and forks.target.idle_after_s == 50.0
    assert starts.target.idle_floor == settings.pool_size
    never = SandboxPool.from_settings(_ForkingBackend(), settings)  # type: ignore[arg-type]
    assert never.target.idle_after_s is None


def test_a_burst_of_20_finds_20_ready_where_sandboxes_fork_from_a_template():
    """With the defaults, a ready fork counts 6 MiB against the pool's 256 MiB: the pool
    grows to a burst of 20 (8 before: 12 of them waited for starts); a bubblewrap of its own
    counts 24 MiB, and the same budget holds 10 of those."""
    defaults = SandboxSettings()
    forks = SandboxPool.from_settings(_ForkingBackend(), defaults)  # type: ignore[arg-type]
    starts = SandboxPool.from_settings(_StartingBackend(), defaults)  # type: ignore[arg-type]
    for pool in (forks, starts):
        pool.target._available = lambda: 8 << 30  # a machine with memory to spare
        for _ in range(20):
            pool.target.arrived()
    assert forks.target.size() == 20
    assert starts.target.size() == 256 // 24
    for _ in range(40):
        forks.target.arrived()
    assert forks.target.size() == defaults.pool_size_max == 32


def test_the_pool_stops_its_ready_sandboxes_once_idle(settings):
    clock = ManualClock()
    warm = WarmTarget(1, idle_after_s=0.2, idle_floor=0, clock=clock)
    with SandboxPool(make_backend(settings), 1, target=warm).start() as pool:
        assert pool.wait_full(60)
        clock.now += 1  # nothing taken since
        wait_until(lambda: pool.ready_count == 0)
        sandbox = pool.acquire()  # an arrival: the floor is back
        wait_until(lambda: pool.ready_count == 1)
        sandbox.kill()


def test_an_idle_pool_with_no_sandbox_left_lets_its_template_rest() -> None:
    """Idle for ``idle_after_s`` with every session's sandbox stopped: the template stops too
    (11 MiB of RSS); the next session starts a new one. Real bubblewrap."""
    from codemode.sandbox import BwrapBackend

    clock = ManualClock()
    backend = BwrapBackend(SandboxSettings(limits=Limits(wall_time_s=10), pool_size=0))
    warm = WarmTarget(1, idle_after_s=0.5, idle_floor=0, clock=clock)
    with SandboxPool(backend, 1, target=warm).start() as pool:
        taken = pool.acquire()
        assert taken.execute("print(1)").stdout == "1\n"
        template = backend.template
        assert template is not None and template.pid is not None
        clock.now += 1  # idle: the pool keeps none ready, but a session's sandbox runs
        wait_until(lambda: pool.ready_count == 0)
        time.sleep(1.5)  # three looks at the idle pool (recheck every 0.5 s)
        assert template.pid is not None, "it rested while a sandbox it forked ran"
        taken.kill()
        pool.forget(taken)
        wait_until(lambda: template.pid is None)
        # A client connects: a new template, and the floor's sandbox from it, before any
        # session asks (it waited for both).
        pool.expect()
        wait_until(lambda: template.pid is not None and pool.ready_count == 1)
        again = pool.acquire()
        assert again.execute("print(2)").stdout == "2\n"
        again.kill()
    backend.close()


def test_the_memory_is_read_only_when_the_target_would_grow():
    clock = ManualClock()
    reads: list[int] = []

    def available() -> int:
        reads.append(1)
        return 8 << 30

    warm = target(clock, available=available)
    assert warm.size() == 2 and reads == []  # at the floor: nothing to cap
    for _ in range(5):
        warm.arrived()
    assert warm.size() == 5 and len(reads) == 1


def test_available_memory_is_what_meminfo_says(tmp_path, monkeypatch):
    import codemode.sandbox.demand as demand

    meminfo = tmp_path / "meminfo"
    monkeypatch.setattr(demand, "_MEMINFO", str(meminfo))
    meminfo.write_text("MemTotal:       16384 kB\nMemFree:   1 kB\nMemAvailable:    4096 kB\n")
    assert demand.available_memory_bytes() == 4096 * 1024
    meminfo.write_text("MemTotal:       16384 kB\nMemFree:   1 kB\n")  # a kernel before 3.14
    assert demand.available_memory_bytes() is None
    meminfo.write_text("MemAvailable:\n")
    assert demand.available_memory_bytes() is None
    meminfo.unlink()
    assert demand.available_memory_bytes() is None


def test_available_memory_of_this_machine_is_read():
    from codemode.sandbox.demand import available_memory_bytes

    with open("/proc/meminfo") as meminfo:
        line = next(line for line in meminfo if line.startswith("MemTotal:"))
    total = int(line.split()[1]) * 1024
    # MemAvailable moves between reads (other processes): within the machine's memory.
    assert 0 < (available_memory_bytes() or 0) <= total

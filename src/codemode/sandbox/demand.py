"""How many ready sandboxes the warm pool keeps: more while sessions arrive fast, never more
than a memory budget holds.

The target is the configured floor, raised to the number of sandboxes taken in the last
``window_s`` seconds (a burst of 20 new sessions asks for 20 more), capped by ``ceiling`` and
by what fits in the memory budget: ``memory_budget_bytes // sandbox_bytes``, and never more
than a quarter of the memory the kernel says is available. When arrivals stop, the target falls
back to the floor and the pool stops refilling beyond it (ready sandboxes above the target are
stopped by the pool, newest first).

With ``idle_after_s``, a pool that nobody took from for that long keeps only ``idle_floor``
ready sandboxes (the engine passes ``[gateway] idle_release_s``, and 0 where sandboxes fork from
a template: one starts in a few milliseconds, so an idle gateway holds none ready). A client
at work (connecting, listing, calling a tool) ``wake``s it and keeps it awake as an arrival
does: the floor holds again before its next session takes a sandbox.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from codemode.sandbox.proctree import read_small

__all__ = [
    "FORKED_SANDBOX_BYTES",
    "STARTED_SANDBOX_BYTES",
    "WarmTarget",
    "available_memory_bytes",
    "warm_target",
]

_MEMINFO = "/proc/meminfo"

MiB = 1 << 20
#: What a ready sandbox costs, for the memory budget. One started in a bubblewrap of its own
#: holds an interpreter of its own; one forked from the template shares the interpreter's and
#: the preloaded modules' pages and the compiler's state with it: 1.3 MiB of its own (USS) and
#: 2.0 MiB PSS once ready on this project's VM (``tests/sandbox/test_template.py`` holds it
#: below this budget, which leaves room for other builds and kernels).
STARTED_SANDBOX_BYTES = 24 * MiB
FORKED_SANDBOX_BYTES = 6 * MiB


def available_memory_bytes() -> int | None:
    """``MemAvailable`` from /proc/meminfo, or None where there is no such file. Read on
    every start of a sandbox while sessions arrive fast: one read and one search, not a
    split of every line (a fifth of the time)."""
    try:
        data = read_small(_MEMINFO)
    except OSError:
        return None
    at = data.find("MemAvailable:")
    if at < 0:
        return None
    field = data[at + len("MemAvailable:") : data.find("\n", at)].split()
    try:
        return int(field[0]) * 1024
    except (ValueError, IndexError):
        return None


class WarmTarget:
    """Thread-safe. ``arrived()`` on every acquire; ``size()`` whenever the pool refills."""

    def __init__(
        self,
        floor: int,
        *,
        ceiling: int | None = None,
        window_s: float = 10.0,
        sandbox_bytes: int = STARTED_SANDBOX_BYTES,
        memory_budget_bytes: int = 512 * MiB,
        available: Callable[[], int | None] = available_memory_bytes,
        clock: Callable[[], float] = time.monotonic,
        idle_after_s: float | None = None,
        idle_floor: int = 0,
    ) -> None:
        self.floor = max(floor, 0)
        self.idle_after_s = idle_after_s if idle_after_s is not None and idle_after_s > 0 else None
        self.idle_floor = min(max(idle_floor, 0), self.floor)
        self.ceiling = max(ceiling if ceiling is not None else self.floor, self.floor)
        self.window_s = window_s
        self.sandbox_bytes = max(sandbox_bytes, 1)
        self.memory_budget_bytes = memory_budget_bytes
        self._available = available
        self._clock = clock
        self._arrivals: deque[float] = deque()
        self._last_arrival = clock()
        self._lock = threading.Lock()

    @property
    def adaptive(self) -> bool:
        return self.ceiling > self.floor

    @property
    def recheck_s(self) -> float | None:
        """How often the pool must look at the target again (None: it changes only on
        arrivals)."""
        if self.idle_after_s is None:
            return self.window_s if self.adaptive else None
        return min(self.window_s, self.idle_after_s) if self.adaptive else self.idle_after_s

    def arrived(self) -> None:
        with self._lock:
            now = self._clock()
            self._arrivals.append(now)
            self._last_arrival = now
            self._forget(now)

    def wake(self) -> bool:
        """A session is likely soon (a client at work): no longer idle, so the floor holds
        again, as after an arrival; unlike one, it asks for no growth. True when it was idle
        until now."""
        with self._lock:
            now = self._clock()
            was_idle = self._idle_at(now)
            self._last_arrival = now
            return was_idle

    def floor_now(self) -> int:
        """The floor, or ``idle_floor`` once nothing arrived for ``idle_after_s``."""
        return self.idle_floor if self.idle() else self.floor

    def idle(self) -> bool:
        """Nothing arrived for ``idle_after_s`` (never, without one)."""
        with self._lock:
            return self._idle_at(self._clock())

    def _idle_at(self, now: float) -> bool:
        """``idle`` at ``now`` (lock held)."""
        after = self.idle_after_s
        return after is not None and now - self._last_arrival >= after

    def recent(self) -> int:
        """Sandboxes taken within the window."""
        with self._lock:
            self._forget(self._clock())
            return len(self._arrivals)

    def memory_cap(self) -> int:
        """Ready sandboxes the memory budget (and a quarter of what is available) holds."""
        budget = self.memory_budget_bytes
        available = self._available() if self.adaptive else None
        if available is not None:
            budget = min(budget, available // 4)
        return max(budget // self.sandbox_bytes, 0)

    def size(self) -> int:
        """Ready sandboxes to keep now. The floor holds whatever the memory; growth above it
        never passes the memory cap."""
        floor = self.floor_now()
        if not self.adaptive:
            return floor
        wanted = min(max(floor, self.recent()), self.ceiling)
        if wanted <= floor:  # no growth to cap (most looks): the memory is not read
            return floor
        return max(floor, min(wanted, self.memory_cap()))

    def _forget(self, now: float) -> None:
        horizon = now - self.window_s
        while self._arrivals and self._arrivals[0] < horizon:
            self._arrivals.popleft()


def warm_target(
    pool_size: int,
    pool_size_max: int,
    pool_memory_mib: int,
    *,
    idle_after_s: float | None = None,
    idle_floor: int = 0,
    sandbox_bytes: int = STARTED_SANDBOX_BYTES,
) -> WarmTarget:
    """The target a ``[sandbox]`` table asks for (``pool_size_max <= pool_size``: a fixed pool);
    ``sandbox_bytes``: what one ready sandbox costs (``FORKED_SANDBOX_BYTES`` where they fork
    from a template)."""
    return WarmTarget(
        pool_size,
        ceiling=pool_size_max,
        memory_budget_bytes=pool_memory_mib * MiB,
        idle_after_s=idle_after_s,
        idle_floor=idle_floor,
        sandbox_bytes=sandbox_bytes,
    )

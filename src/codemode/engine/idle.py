"""Idle sessions cost nothing: their sandboxes are released, and the session stays.

A session unused for ``[gateway] idle_release_s`` seconds that runs nothing and waits for no
approval is checkpointed (its workspace, and the variables the code named with ``from state
import keep``; skipped when nothing changed since the last checkpoint) and its sandbox is
stopped. The session keeps its handle, vault, budgets and kv values; its next execution gets
a new sandbox, restores the checkpoint first, and its result says so (``restored``). A session
whose checkpoint cannot be saved (over its limits) keeps its sandbox. The registry releases
idle sessions the same way (held, released, settled) when another session needs a sandbox
and ``max_sessions`` hold one (``SessionRegistry.make_room``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import anyio
import anyio.to_thread

from codemode.engine.registry import SessionRegistry
from codemode.engine.session import Session
from codemode.heap import collect_and_trim

__all__ = ["IdleReleaser", "sweep_interval", "upkeep"]

log = logging.getLogger(__name__)


class IdleReleaser:
    """Releases the sandboxes of sessions idle for ``after_s`` seconds (``sweep``)."""

    def __init__(self, registry: SessionRegistry, after_s: float) -> None:
        self.registry = registry
        self.after_s = after_s

    def sweep(self) -> list[str]:
        """Release what is idle now (blocking: checkpoints run in the sandboxes); the
        handles released. An execution that arrives meanwhile waits, then restores."""
        released: list[str] = []
        for record in self.registry.hold_idle(self.after_s):
            try:
                if record.release(self._still_idle(record)):
                    released.append(record.handle)
            except Exception:
                log.exception("could not release the idle session %s", record.handle[:12])
            finally:
                self.registry.settle(record)
        return released

    def _still_idle(self, record: Session) -> Callable[[], bool]:
        return lambda: self.registry.held_alone(record, self.after_s)


async def upkeep(registry: SessionRegistry, release_after_s: float) -> None:
    """The engine's background loop: release idle sessions' sandboxes (``release_after_s``;
    0 never) and close sessions past the registry's idle timeout. Runs until cancelled."""
    expire_every = min(max(registry.idle_timeout_s / 4, 0.5), 60.0)
    releaser = IdleReleaser(registry, release_after_s) if release_after_s > 0 else None
    tick = sweep_interval(release_after_s) if releaser is not None else expire_every
    next_expiry = time.monotonic() + expire_every
    while True:
        await asyncio.sleep(tick)
        try:
            if releaser is not None:
                released = await anyio.to_thread.run_sync(releaser.sweep)
                if released:
                    log.debug("released the sandboxes of %d idle session(s)", len(released))
                    # What those sessions held (results, buffers) stays in malloc otherwise.
                    await anyio.to_thread.run_sync(collect_and_trim)
            if time.monotonic() >= next_expiry:
                next_expiry = time.monotonic() + expire_every
                await anyio.to_thread.run_sync(registry.expire_idle)
        except Exception:  # the loop must outlive one bad sweep, or nothing expires again
            log.exception("the sweep of idle sessions failed")


def sweep_interval(release_after_s: float) -> float:
    """Seconds between sweeps: a session is released at most this long after it has been
    idle for ``release_after_s`` (plus the time its checkpoint takes)."""
    return min(max(release_after_s / 4, 0.05), 5.0)

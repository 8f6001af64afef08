"""Releases that wait for a quiet moment: the sandbox of a client that went away is stopped
once the clients still coming are served.

When 20 clients arrive together, each one done (its connection ended) used to have its session
checkpointed and its sandbox stopped at once, on a thread of its own: about 0.6 ms of the
gateway's CPU each, and the kernel's work to end the processes and their cgroup, in the middle
of the burst, taken from the clients still arriving. ``QuietReleases`` keeps them until nothing
happened for ``QUIET_S`` (no execution began, no other connection ended), and runs them then, on
one thread. They wait ``MAX_WAIT_S`` at most, and a queue of ``MAX_QUEUED`` runs at once.

Nothing is refused meanwhile: a session waiting here is idle, so a quota or ``max_sessions``
that needs its place releases it on demand as before (``SessionRegistry.make_room``); one that
is used again is busy, and its release is skipped (``release_now`` leaves busy sessions).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["MAX_QUEUED", "MAX_WAIT_S", "QUIET_S", "QuietReleases"]

log = logging.getLogger(__name__)

QUIET_S = 0.05
MAX_WAIT_S = 1.0
MAX_QUEUED = 64


class QuietReleases:
    """Handles to ``release`` once the gateway is quiet (``touch``: something happened)."""

    def __init__(
        self, release: Callable[[str], object], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._release = release
        self._clock = clock
        self._cond = threading.Condition()
        self._pending: dict[str, None] = {}  # in order, each handle once
        self._first = 0.0  # when the oldest pending one was added
        self._last = float("-inf")  # when something last happened
        self._thread: threading.Thread | None = None
        self._closed = False

    def touch(self) -> None:
        """Something happened (an execution began): releases wait a while longer."""
        self._last = self._clock()

    def add(self, handle: str) -> None:
        """Release ``handle`` once quiet (this is something happening too)."""
        with self._cond:
            if self._closed:
                return
            now = self._clock()
            first = not self._pending
            if first:
                self._first = now
            self._pending[handle] = None
            self._last = now
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="codemode-release", daemon=True
                )
                self._thread.start()
            # Otherwise the thread waits until the first was due, and looks again then: a
            # wake-up per ended connection cost the burst as much as the releases did.
            if first or len(self._pending) >= MAX_QUEUED:
                self._cond.notify()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def due_in(self, now: float) -> float:
        """Seconds until the pending releases are due (0: now; call with the lock held)."""
        if len(self._pending) >= MAX_QUEUED:
            return 0.0
        due = min(self._last + QUIET_S, self._first + MAX_WAIT_S)
        return max(0.0, due - now)

    def take_due(self) -> list[str]:
        """The handles due now, taken off the queue ([] if none is due yet)."""
        with self._cond:
            return self._take_due()

    def _take_due(self) -> list[str]:
        """``take_due`` with the lock held."""
        if not self._pending or self.due_in(self._clock()) > 0:
            return []
        handles, self._pending = list(self._pending), {}
        return handles

    def close(self) -> None:
        """Stop the thread; releases not yet run are dropped (a gateway that stops keeps
        every session's checkpoint itself)."""
        with self._cond:
            self._closed = True
            self._pending = {}
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not (handles := self._take_due()):
                    self._cond.wait(self.due_in(self._clock()) if self._pending else None)
                if self._closed:
                    return
            for handle in handles:
                try:
                    self._release(handle)
                except Exception:
                    log.exception("could not release the session %s", handle[:12])

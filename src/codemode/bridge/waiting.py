"""Work a tool call's thread defers until the call is out and the thread only waits.

A wrapper that has work to do beside a call, but nothing to do with its result (the audit
digest of a megabyte argument), should not run it while the other wrappers still read the
arguments: both want the GIL, and the guards are what the call waits for. It defers the work
here; the invoker that sends the call to its server calls ``now_waiting`` once the request is
on its way, and the work starts then. Work no invoker started (a call refused before it went
out) is the wrapper's to finish: ``defer_until_waiting`` returns a handle to withdraw it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["defer_until_waiting", "now_waiting"]

log = logging.getLogger(__name__)

_local = threading.local()


def _deferred() -> list[Callable[[], None]]:
    queue: list[Callable[[], None]] | None = getattr(_local, "queue", None)
    if queue is None:
        queue = _local.queue = []
    return queue


def defer_until_waiting(start: Callable[[], None]) -> Callable[[], None]:
    """Run ``start`` when this thread's call is out (``now_waiting``). Returns a function that
    withdraws it, if it has not run yet (call it once the call is over, either way)."""
    queue = _deferred()
    queue.append(start)

    def withdraw() -> None:
        if start in queue:
            queue.remove(start)

    return withdraw


def now_waiting() -> None:
    """This thread's call is on its way to its server: start the work deferred until then.
    A piece of work that fails to start is left to its owner (it stays as if never started):
    the call itself must not fail for it."""
    queue = _deferred()
    while queue:
        start = queue.pop(0)
        try:
            start()
        except Exception:  # the owner does the work itself when it asks
            log.debug("deferred work did not start", exc_info=True)

"""Stopping an execution the caller cancelled.

On the first sight of the cancel the runner stops serving the bridge (frames are dropped, so
no tool call starts) and interrupts the code with SIGINT (a KeyboardInterrupt in the code),
but only once the guest has read every reply sent to it: interrupted halfway through reading
one, it would take that reply for the next execution's. Code that has not stopped within
``CANCEL_GRACE_S`` is ended with its sandbox.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from codemode.sandbox.outcome import Outcome

if TYPE_CHECKING:
    from codemode.sandbox.facts import GuestFacts

__all__ = ["CANCEL_GRACE_S", "check_cancel", "interrupted_by_us"]

# After a cancel, how long the code has to stop on its KeyboardInterrupt before the sandbox
# is killed.
CANCEL_GRACE_S = 2.0
_INTERRUPT_AFTER_S = 0.1


def check_cancel(
    guest: GuestFacts,
    resume: Callable[[], None],
    cancel: threading.Event,
    outcome: Outcome,
    now: float,
) -> bool:
    """True, to end the execution, once a cancelled code has had its grace period. ``guest``
    is read and interrupted; ``resume`` lets a stopped sandbox run (to see the signal)."""
    if not cancel.is_set():
        return False
    if outcome.cancelled_at is None:
        outcome.cancelled_at = now
    waited = now - outcome.cancelled_at
    # Code that is about to end by itself (a refused call) is left to end.
    if not outcome.interrupted and waited >= _INTERRUPT_AFTER_S and not guest.unread_bytes():
        outcome.interrupted = True
        resume()  # a stopped guest would not see the signal
        guest.interrupt()
    if waited < CANCEL_GRACE_S:
        return False
    outcome.status = "cancelled"
    return True


def interrupted_by_us(done: dict[str, Any] | None) -> bool:
    """Did the code end on the KeyboardInterrupt we sent (so no signal is left pending)?"""
    error = done.get("error") if done is not None else None
    return isinstance(error, dict) and error.get("type") == "KeyboardInterrupt"

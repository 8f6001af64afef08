"""Stopping an execution the caller cancelled.

On the first sight of the cancel the runner stops serving the bridge (frames are dropped, so
no tool call starts) and interrupts the code with SIGINT (a KeyboardInterrupt in the code),
but only once the guest has read every reply sent to it: interrupted halfway through reading
one, it would take that reply for the next execution's.

The code's acknowledgement is its end (the guest's "done"). The sandbox is ended instead (and
the next result says it was restarted) only once the code had its chance to stop and did not:
after ``CANCEL_GRACE_S``, if its main thread used ``CANCEL_CPU_S`` of CPU since the cancel (it
keeps running), or ran and went back to sleep for good (it swallowed the interrupt: asleep, and
no CPU used between two looks), or cannot take SIGINT (ignored or blocked) and is off the CPU
with nothing sent that the runner has not read (a guest that ended on the interrupt blocks
every signal as it sends its "done"). A guest that has not been on a CPU since the cancel, as on a
loaded machine, can still be interrupted: it is waited for, up to ``CANCEL_MAX_S``. Wall time
alone restarted sandboxes whose guests never got the CPU to stop, and lost their variables.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from codemode.sandbox.outcome import Outcome
from codemode.sandbox.proctree import read_small

if TYPE_CHECKING:
    from codemode.sandbox.facts import GuestFacts

__all__ = [
    "CANCEL_CPU_S",
    "CANCEL_GRACE_S",
    "CANCEL_MAX_S",
    "GuestProbe",
    "ProcGuest",
    "check_cancel",
    "interrupted_by_us",
]

# After a cancel, the least time the code has to stop on its KeyboardInterrupt.
CANCEL_GRACE_S = 2.0
# CPU the guest's main thread may use after a cancel without stopping: unwinding on a
# KeyboardInterrupt takes milliseconds; code that keeps the CPU uses it all.
CANCEL_CPU_S = 0.5
# The longest wait for a guest that never gets the CPU (or whose CPU time cannot be read).
CANCEL_MAX_S = 60.0
_INTERRUPT_AFTER_S = 0.1
_SIGINT_BIT = 1 << (signal.SIGINT - 1)


class GuestProbe(Protocol):
    """What the host can see of the guest's main thread."""

    def cpu_ns(self, pid: int) -> int | None:
        """CPU time used so far, in ns (None: unreadable)."""
        ...

    def runnable(self, pid: int) -> bool:
        """On a CPU or waiting for one (not asleep, not stopped)."""
        ...

    def takes_sigint(self, pid: int) -> bool:
        """SIGINT is neither ignored nor blocked: an interrupt reaches the code."""
        ...


class ProcGuest:
    """``GuestProbe`` from /proc."""

    def cpu_ns(self, pid: int) -> int | None:
        try:
            return int(read_small(f"/proc/{pid}/schedstat").split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def runnable(self, pid: int) -> bool:
        try:
            return read_small(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[0] == "R"
        except (OSError, IndexError):
            return False

    def takes_sigint(self, pid: int) -> bool:
        try:
            lines = read_small(f"/proc/{pid}/status").splitlines()
        except OSError:
            return True
        for line in lines:
            key, _, value = line.partition(":")
            if key in ("SigIgn", "SigBlk") and int(value.strip(), 16) & _SIGINT_BIT:
                return False
        return True


_PROC = ProcGuest()


def check_cancel(
    guest: GuestFacts,
    resume: Callable[[], None],
    cancel: threading.Event,
    outcome: Outcome,
    now: float,
    *,
    pid: int | None,
    probe: GuestProbe = _PROC,
    sent: Callable[[], bool] = lambda: False,
) -> bool:
    """True, to end the execution (and the sandbox), once cancelled code had its chance to
    stop and did not. ``guest`` is read and interrupted; ``resume`` lets a stopped sandbox run
    (to see the signal); ``pid``: the guest's main thread on this machine (None: elsewhere,
    judged by the grace period alone), whose CPU ``probe`` reads; ``sent``: the guest sent
    something not read yet (its end may be in it: read before judging a guest asleep)."""
    if not cancel.is_set():
        return False
    if outcome.cancelled_at is None:
        outcome.cancelled_at = now
        outcome.cancel_cpu_ns = probe.cpu_ns(pid) if pid is not None else None
    waited = now - outcome.cancelled_at
    # Code that is about to end by itself (a refused call) is left to end.
    if not outcome.interrupted and waited >= _INTERRUPT_AFTER_S and not guest.unread_bytes():
        outcome.interrupted = True
        resume()  # a stopped guest would not see the signal
        guest.interrupt()
    if waited < CANCEL_GRACE_S:
        return False
    if waited < CANCEL_MAX_S and not _had_its_chance(probe, pid, outcome, sent):
        return False
    outcome.status = "cancelled"
    return True


def _had_its_chance(
    probe: GuestProbe, pid: int | None, outcome: Outcome, sent: Callable[[], bool]
) -> bool:
    at_cancel = outcome.cancel_cpu_ns
    if pid is None or at_cancel is None:
        return True  # nothing to judge by: the grace period alone
    cpu = probe.cpu_ns(pid)
    if cpu is None:
        return True
    last, outcome.cancel_cpu_seen = outcome.cancel_cpu_seen, cpu
    used = cpu - at_cancel
    if used >= CANCEL_CPU_S * 1e9:
        return True
    # A guest that ended on the interrupt blocks every signal for its wait for the next frame
    # (see ``resting``) as it sends its "done": read what it sent before calling it deaf or
    # asleep, and give one still on its way there (on a CPU) its turn.
    if sent():
        return False
    if not probe.takes_sigint(pid) and not probe.runnable(pid):
        return True
    # It ran since the cancel and sleeps now instead of ending, and has not run since the
    # previous look (meanwhile the runner read whatever it sent, its "done" included). On
    # or waiting for a CPU, or never on one since the cancel, it is on its way to stop.
    settled = last is not None and cpu == last
    return used > 0 and settled and not probe.runnable(pid)


def interrupted_by_us(done: dict[str, Any] | None) -> bool:
    """Did the code end on the KeyboardInterrupt we sent (so no signal is left pending)?"""
    error = done.get("error") if done is not None else None
    return isinstance(error, dict) and error.get("type") == "KeyboardInterrupt"

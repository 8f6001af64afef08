"""When a cancel gives up on interrupting and ends the sandbox: on the guest's behaviour,
never on wall time alone.

Finding: under load, two of six HTTP cancels restarted the sandbox (variables lost) instead of
interrupting the code: its guest had not been on a CPU to take the KeyboardInterrupt within
the 2 s grace period. The clock and the guest are stand-ins here, so the test does not depend
on the machine's load; tests/engine/test_cancel_progress_quota.py runs the real sandbox.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from codemode.sandbox.cancel import (
    CANCEL_CPU_S,
    CANCEL_GRACE_S,
    CANCEL_MAX_S,
    ProcGuest,
    check_cancel,
)
from codemode.sandbox.outcome import Outcome

PID = 4242
MS = 1_000_000


@dataclass
class Guest:
    """The guest's main thread as /proc would show it."""

    cpu: int | None = 7 * MS
    running: bool = False
    sigint: bool = True
    unread: int = 0
    interrupts: int = 0

    def cpu_ns(self, pid: int) -> int | None:
        return self.cpu

    def runnable(self, pid: int) -> bool:
        return self.running

    def takes_sigint(self, pid: int) -> bool:
        return self.sigint


@dataclass
class _Facts:
    guest: Guest

    def unread_bytes(self) -> int:
        return self.guest.unread

    def interrupt(self) -> None:
        self.guest.interrupts += 1


@dataclass
class _Process:
    facts: _Facts
    guest_pid: int | None = PID


@dataclass
class FakeSandbox:
    guest: Guest
    process: _Process = field(init=False)

    def __post_init__(self) -> None:
        self.process = _Process(_Facts(self.guest))

    def resume(self) -> None:
        pass


class Cancelled:
    def __init__(self, guest: Guest) -> None:
        self.guest = guest
        self.sandbox = FakeSandbox(guest)
        self.outcome = Outcome()
        self.event = threading.Event()
        self.event.set()

    def at(self, now: float, *, sent: bool = False) -> bool:
        """Is the sandbox ended, checked at ``now`` seconds after the cancel? ``sent``: the
        guest sent something the runner has not read yet."""
        return check_cancel(
            self.sandbox.process.facts,  # type: ignore[arg-type]
            self.sandbox.resume,
            self.event,
            self.outcome,
            now,
            pid=self.sandbox.process.guest_pid,
            probe=self.guest,
            sent=lambda: sent,
        )


def test_a_guest_that_never_got_a_cpu_is_waited_for() -> None:
    guest = Guest(running=True)  # waiting for a CPU the whole time
    cancel = Cancelled(guest)
    assert not cancel.at(0.0)
    assert not cancel.at(0.2) and guest.interrupts == 1
    for later in (CANCEL_GRACE_S, 5.0, 30.0, CANCEL_MAX_S - 0.1):
        assert not cancel.at(later), later
    assert cancel.at(CANCEL_MAX_S)  # the ceiling for a guest that never runs
    assert cancel.outcome.status == "cancelled"


def test_a_guest_on_its_way_to_stop_is_not_ended() -> None:
    guest = Guest(running=True)
    cancel = Cancelled(guest)
    cancel.at(0.0)
    cancel.at(0.2)
    guest.cpu = (guest.cpu or 0) + 3 * MS  # a slice of CPU, then preempted (runnable)
    assert not cancel.at(CANCEL_GRACE_S + 1)


def test_a_guest_asleep_that_never_ran_since_the_cancel_is_not_ended() -> None:
    cancel = Cancelled(Guest(running=False))
    cancel.at(0.0)
    assert not cancel.at(CANCEL_GRACE_S + 1)


def test_code_that_keeps_the_cpu_is_ended_after_the_grace_period() -> None:
    guest = Guest(running=True)
    cancel = Cancelled(guest)
    cancel.at(0.0)
    guest.cpu = (guest.cpu or 0) + int(CANCEL_CPU_S * 1e9)
    assert not cancel.at(CANCEL_GRACE_S - 0.1)
    assert cancel.at(CANCEL_GRACE_S)


def test_code_that_swallowed_the_interrupt_and_sleeps_is_ended() -> None:
    guest = Guest(running=True)
    cancel = Cancelled(guest)
    cancel.at(0.0)
    cancel.at(0.2)
    guest.cpu = (guest.cpu or 0) + 1 * MS
    guest.running = False  # asleep again instead of ending
    assert not cancel.at(CANCEL_GRACE_S)  # it ran since the last look: "done" may be on its way
    assert cancel.at(CANCEL_GRACE_S + 0.05)  # asleep, and no CPU since: for good


def test_a_guest_that_just_ran_and_sleeps_is_given_a_look_more() -> None:
    """After a stop, a guest sends "done" and waits for its next execution: asleep, having
    just run. The runner reads "done" before the next look, which would see it settled."""
    guest = Guest(running=False)
    cancel = Cancelled(guest)
    cancel.at(0.0)
    for step in range(1, 5):
        guest.cpu = (guest.cpu or 0) + 1 * MS  # it runs a little between looks
        assert not cancel.at(CANCEL_GRACE_S + step * 0.05)


def test_code_that_ignores_sigint_is_ended_after_the_grace_period() -> None:
    cancel = Cancelled(Guest(sigint=False))
    cancel.at(0.0)
    assert cancel.at(CANCEL_GRACE_S)


def test_a_guest_that_ended_on_the_interrupt_is_read_before_it_is_judged() -> None:
    """Finding: a guest that ended on the KeyboardInterrupt blocks every signal for its wait
    for the next frame as it sends its "done"; seen then (SIGINT blocked, off the CPU) it was
    taken for code deaf to the interrupt and its sandbox ended, variables lost, with its
    "done" unread in the bridge."""
    guest = Guest()
    cancel = Cancelled(guest)
    cancel.at(0.0)
    cancel.at(0.2)
    guest.cpu = (guest.cpu or 0) + 1 * MS  # it ran: took the interrupt, ended, sent "done"
    guest.sigint = False  # blocked for its wait
    assert not cancel.at(CANCEL_GRACE_S, sent=True)  # its "done" is read first
    guest.running = True  # blocked, on its way to send
    assert not cancel.at(CANCEL_GRACE_S + 0.1)
    guest.running = False  # blocked, asleep, nothing sent: deaf indeed
    assert cancel.at(CANCEL_GRACE_S + 0.2)


def test_code_that_keeps_the_cpu_is_ended_whatever_it_sends() -> None:
    guest = Guest(sigint=False, running=True)
    cancel = Cancelled(guest)
    cancel.at(0.0)
    guest.cpu = (guest.cpu or 0) + int(CANCEL_CPU_S * 1e9)
    assert cancel.at(CANCEL_GRACE_S, sent=True)


def test_without_a_reading_the_grace_period_decides_as_before() -> None:
    cancel = Cancelled(Guest(cpu=None))
    cancel.at(0.0)
    assert not cancel.at(CANCEL_GRACE_S - 0.1)
    assert cancel.at(CANCEL_GRACE_S)


def test_the_interrupt_waits_until_the_guest_read_its_replies() -> None:
    guest = Guest(unread=10, running=True)
    cancel = Cancelled(guest)
    cancel.at(0.0)
    assert not cancel.at(1.0) and guest.interrupts == 0
    guest.unread = 0
    assert not cancel.at(1.1) and guest.interrupts == 1
    assert not cancel.at(1.2) and guest.interrupts == 1


@pytest.mark.parametrize("field_name", ["SigIgn", "SigBlk"])
def test_proc_guest_reads_an_ignored_or_blocked_sigint(
    field_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    status = "Name:\tpython3\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"
    masked = status.replace(f"{field_name}:\t0000000000000000", f"{field_name}:\t0000000000000002")
    monkeypatch.setattr("codemode.sandbox.cancel.read_small", lambda path: masked)
    assert not ProcGuest().takes_sigint(PID)
    monkeypatch.setattr("codemode.sandbox.cancel.read_small", lambda path: status)
    assert ProcGuest().takes_sigint(PID)


def test_proc_guest_reads_this_process() -> None:
    import os

    probe = ProcGuest()
    assert isinstance(probe.cpu_ns(os.getpid()), int)
    assert probe.runnable(os.getpid())  # reading its own stat, it is on a CPU
    assert probe.takes_sigint(os.getpid())

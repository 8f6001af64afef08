"""Probes and pieces add up across an owner's sessions: a new session for each guess (each
with a vault of its own, where the address has another token) is stopped as one session is;
another owner's probes start from nothing."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.config import CodemodeConfig
from codemode.engine.chain import build_invoker_chain
from codemode.errors import DataFlowDeniedError
from codemode.policy.outcome import ApprovalDeniedError
from codemode.privacy import PrivacySettings
from codemode.privacy.ledger import ProbeLedger, ProbeLedgers
from codemode.privacy.oracle import OracleSettings
from codemode.privacy.recall import skeleton
from codemode.tools import ToolCall
from tests.privacy.test_oracle_probes import ALPHABET, PIECES, SECRET, SPECS, Approver, Crm

_sessions = iter(range(10**6))


def new_session(crm: Crm, approver: Approver, ledger: ProbeLedger | None) -> Any:
    """A session of its own (its own vault), which reads the customers first."""
    oracle = OracleSettings(calls_per_session=5000, calls_per_minute=5000)
    config = CodemodeConfig(servers={}, privacy=PrivacySettings(oracle=oracle))
    invoker = build_invoker_chain(
        config, crm, session=f"s{next(_sessions)}", specs=lambda s, t: SPECS.get(t),
        approver=approver, probes=ledger,
    ).invoker  # fmt: skip
    invoker.invoke(ToolCall("crm", "list_customers", {}), timeout_s=5)
    return invoker


def probe_across_sessions(crm: Crm, approver: Approver, ledger: Any) -> tuple[str, list[str]]:
    """Hostile code that guesses one place at a time (``___d%``: only that place is shown) and
    opens a new session whenever one is paused; returns what it confirmed, in order."""
    known, confirmed = "", []
    for _ in range(3 * len(SECRET)):
        invoker = new_session(crm, approver, ledger() if callable(ledger) else ledger)
        try:
            while len(known) < len(SECRET):
                for char in ALPHABET:
                    query = "_" * len(known) + f"{char}%"
                    found = invoker.invoke(ToolCall("crm", "search", {"query": query}), timeout_s=5)
                    if found["found"]:
                        known += char
                        confirmed.append(known)
                        break
                else:
                    return known, confirmed
        except ApprovalDeniedError:
            continue  # a new session, from what is known
    return known, confirmed


def test_a_probe_spread_over_sessions_works_when_each_session_starts_from_nothing() -> None:
    known, _ = probe_across_sessions(Crm(), Approver(False), ProbeLedger)
    assert skeleton(known) == skeleton(SECRET)  # ("_" stands for "@" here: a wildcard)


def test_a_probe_spread_over_an_owners_sessions_is_stopped_before_a_tenth_shows() -> None:
    ledgers, approver = ProbeLedgers(), Approver(False)
    known, _ = probe_across_sessions(Crm(), approver, ledgers.for_owner("alice"))
    assert len(skeleton(known)) < 0.1 * len(skeleton(SECRET)) + 1, known  # the paused guess
    assert len(known) < 4 and approver.asked
    # What alice's sessions showed does not count against bob's: his first guesses run.
    asked = len(approver.asked)
    bob = new_session(Crm(), approver, ledgers.for_owner("bob"))
    for query in ("j%", "_o%"):
        bob.invoke(ToolCall("crm", "search", {"query": query}), timeout_s=5)
    assert len(approver.asked) == asked


def test_pieces_sent_from_many_sessions_to_a_forbidden_server_add_up() -> None:
    crm, ledger = Crm(), ProbeLedger()
    with pytest.raises(DataFlowDeniedError, match=r"pieces of <EMAIL_\d+>"):
        for piece in PIECES:  # a session for each piece; crm data may go back to crm only
            invoker = new_session(crm, Approver(False), ledger)
            invoker.invoke(ToolCall("mail", "send", {"body": piece}), timeout_s=5)
    assert len(crm.sent) < len(PIECES)
    for piece in PIECES:  # with a ledger per session, every piece goes
        invoker = new_session(crm, Approver(False), ProbeLedger())
        invoker.invoke(ToolCall("mail", "send", {"body": piece}), timeout_s=5)


def test_ledgers_keep_the_most_recent_values_and_owners() -> None:
    ledger = ProbeLedger(max_values=2)
    with ledger.lock:
        ledger.track("aaa").probed.add(1)
        ledger.track("bbb")
        ledger.track("aaa")  # used again: now the most recent
        ledger.track("ccc")
        assert len(ledger) == 2 and ledger.track("aaa").probed == {1}
    ledgers = ProbeLedgers(max_owners=2)
    alice = ledgers.for_owner("alice")
    assert ledgers.for_owner("alice") is alice and ledgers.for_owner(None) is ledgers.for_owner("")
    ledgers.for_owner("bob")
    assert ledgers.for_owner("alice") is not alice  # the oldest of three owners was forgotten

"""Pieces of one hidden value sent where its flow rules forbid add up, wherever they sit in the
value and whichever forbidden server they go to: a refusal's gap does not reset the count, and
alternating between two forbidden servers does not halve it."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.config import CodemodeConfig
from codemode.engine.chain import build_invoker_chain
from codemode.errors import DataFlowDeniedError
from codemode.privacy import PrivacySettings
from codemode.privacy.recall import fragment_chars, skeleton
from codemode.tokens import count_tokens
from codemode.tools import ToolCall

SECRET = "zq.kx7vh3@mailbox-secure.example"
PIECES = [SECRET[at : at + 6] for at in range(0, len(SECRET), 6)]  # each below the fragment


class Upstreams:
    """``crm.list`` holds the address; every other call is a send, recorded."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        if call.tool == "list":
            return {"customers": [{"name": "Priya Raman", "email": SECRET}]}
        self.sent.append((call.server, call.arguments["body"]))
        return {"ok": True}


def send_all(destinations: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """Reads the customers (crm data may go back to crm only), then sends every piece, each
    to the next destination in turn; returns what was sent and the refusals."""
    upstreams = Upstreams()
    config = CodemodeConfig(servers={}, privacy=PrivacySettings(flows={"crm": ()}))
    invoker = build_invoker_chain(
        config, upstreams, session="s", specs=lambda s, t: None, approver=None
    ).invoker
    rows = invoker.invoke(ToolCall("crm", "list", {}), timeout_s=5)["customers"]
    assert rows[0]["email"].startswith("<EMAIL_")
    refusals = []
    for number, piece in enumerate(PIECES):
        server = destinations[number % len(destinations)]
        try:
            invoker.invoke(ToolCall(server, "send", {"body": piece}), timeout_s=5)
        except DataFlowDeniedError as error:
            refusals.append(str(error))
    return upstreams.sent, refusals


def shown(sent: list[tuple[str, str]]) -> int:
    return sum(len(skeleton(body)) for _, body in sent)


@pytest.mark.parametrize("destinations", [["mail"], ["mail", "chat"]], ids=["one", "two"])
def test_pieces_after_a_refusal_and_across_servers_are_refused(destinations: list[str]) -> None:
    sent, refusals = send_all(destinations)
    limit = fragment_chars(len(skeleton(SECRET)))
    assert refusals, sent
    assert shown(sent) < limit, sent  # what went out stays below one refused fragment
    assert len(refusals) == len(PIECES) - len(sent)  # every later piece refused too
    message = refusals[-1]
    assert "pieces of <EMAIL_1>" in message and SECRET not in message
    assert all(f"'{server}'" in message for server in {server for server, _ in sent})
    assert count_tokens(message) < 120


def test_pieces_back_to_their_own_server_are_never_counted() -> None:
    sent, refusals = send_all(["crm"])
    assert not refusals and [body for _, body in sent] == PIECES


def test_an_idle_session_lets_go_of_its_indexes_and_still_counts_pieces_and_recalls() -> None:
    """The session goes idle between two pieces (``drop_caches``, as its release does): the
    indexes built from the vault are dropped, the next calls build them again, and nothing
    they answer changes: the pieces still add up, a fragment is still recalled."""
    upstreams = Upstreams()
    config = CodemodeConfig(servers={}, privacy=PrivacySettings(flows={"crm": ()}))
    chain = build_invoker_chain(
        config, upstreams, session="s", specs=lambda s, t: None, approver=None
    )
    invoker, privacy = chain.invoker, chain.privacy
    assert privacy is not None
    invoker.invoke(ToolCall("crm", "list", {}), timeout_s=5)
    refusals = []
    for number, piece in enumerate(PIECES):
        if number == 2:
            privacy.drop_caches()  # idle: released
            assert privacy._tokenizer._recall is None
            assert all(knowledge.values == [] for knowledge in _knowledge_of(invoker))
        try:
            invoker.invoke(ToolCall("mail", "send", {"body": piece}), timeout_s=5)
        except DataFlowDeniedError as error:
            refusals.append(str(error))
    assert refusals and shown(upstreams.sent) < fragment_chars(len(skeleton(SECRET)))
    privacy.drop_caches()
    # The address cut and spelled in a later result is recalled from the rebuilt index.
    assert privacy.scan_output("id zq-kx7vh3 at mailbox-secure") == "id <EMAIL_1> at mailbox-secure"


def _knowledge_of(invoker: Any) -> list[Any]:
    """The oracle guards' indexes of hidden values down the chain."""
    found = []
    while invoker is not None:
        knowledge = getattr(invoker, "knowledge", None)
        if knowledge is not None:
            found.append(knowledge)
        invoker = getattr(invoker, "inner", None)
    assert found
    return found

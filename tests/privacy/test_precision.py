"""Precision: on thousands of generated customer records whose names, companies and websites
share words with their e-mail addresses, nothing but the addresses and phone numbers is
replaced (in the result, when a value comes back alone later, when the code prints it), and
every leak shape the recall handles still shows the record's own token."""

from __future__ import annotations

from typing import Any

from codemode.privacy import PrivacyInvoker, PrivacySettings, Vault
from codemode.tools import ToolCall
from tests.privacy.precision_corpus import HIDDEN, KEPT, leaks, records

CORPUS = records(2000, seed=23)


class Customers:
    """``get_customer`` returns a record; ``echo`` returns a value as ``SELECT 'x'`` would."""

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        if call.tool == "get_customer":
            return CORPUS[int(call.arguments["id"]) - 1].row()
        return {"result": call.arguments["value"]}


def _loaded() -> PrivacyInvoker:
    invoker = PrivacyInvoker(Customers(), Vault(), PrivacySettings())
    for record in CORPUS:
        got = invoker.invoke(
            ToolCall("crm", "get_customer", {"id": record.kept["id"]}), timeout_s=5
        )
        kept = {key: got[key] for key in KEPT}
        assert kept == record.kept
        for key in HIDDEN:
            assert got[key] == invoker.vault.token_of(record.hidden[key]), (record, got)
    return invoker


def test_the_corpus_is_deterministic_and_shares_words() -> None:
    assert records(50, seed=23) == CORPUS[:50]
    shared = sum(
        record.kept["last"].lower() in record.hidden["email"]
        or record.kept["first"].lower() in record.hidden["email"]
        for record in CORPUS
    )
    assert shared == len(CORPUS)


def test_no_kept_value_is_ever_replaced() -> None:
    invoker = _loaded()
    false = []
    for record in CORPUS:
        for key in KEPT:
            value = record.kept[key]
            again = invoker.invoke(ToolCall("crm", "echo", {"value": value}), timeout_s=5)
            if again["result"] != value or invoker.scan_output(value) != value:
                false.append(value)
    assert false == []


def test_the_recall_still_finds_each_leak_shape_with_the_own_token() -> None:
    invoker = _loaded()
    own = total = 0
    for record in CORPUS:
        for field, shape, text in leaks(record):
            shown = invoker.scan_output(text)
            token = invoker.vault.token_of(record.hidden[field])
            assert record.hidden[field] not in shown, (shape, text, shown)
            assert token is not None and "<" in shown, (shape, text, shown)
            total += 1
            own += token in shown
    # The rest are cuts that fit two customers' addresses (the earlier one's token shows).
    assert own / total > 0.99

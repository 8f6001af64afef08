"""Text of a few KiB or more that a tool hands back as it received it is read for known values
once: the flow check's reading of the argument answers the tokenizer's reading of the echoed
result (by content hash, while the vault is unchanged), and what it answers is what a new
reading finds. Where the data of every origin may reach the tool unasked, the flow check does
not read the argument at all: only the result is read.

The texts here carry a token, so the tool receives the value in its place and the echo is not
the code's own text (which would come back unread, ``test_sent_texts``)."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.policy.flowgate import flows_approved
from codemode.privacy import PrivacyInvoker, PrivacySettings, Vault
from codemode.privacy.digests import content_digest
from codemode.privacy.recall import FRAGMENT_SCAN_MAX, KEPT_MIN_CHARS, Recall
from codemode.privacy.vault import TokenSource
from codemode.tools import ToolCall

LINE = "Order 4417 shipped on 2024-05-02, total 1,240.50 EUR. Questions to ops@example.com.\n"
CRM = TokenSource("crm", "list_contacts", "contacts[].email")
# Data from mail reaches crm's tools only when the human allows it: the flow check reads.
MAIL = TokenSource("mail", "inbox", "messages[].from")
LONG = LINE * (2 * FRAGMENT_SCAN_MAX // len(LINE))
ADDRESS = "ops@example.com"


class Echo:
    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        return call.arguments["text"]


def reads_of_long_text(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every reading of a text of KEPT_MIN_CHARS or more by the recall, as its length."""
    reads: list[int] = []
    plain = Recall._find_plain

    def counted(self: Recall, text: str, *args: Any, **kwargs: Any) -> Any:
        if len(text) >= KEPT_MIN_CHARS:
            reads.append(len(text))
        return plain(self, text, *args, **kwargs)

    monkeypatch.setattr(Recall, "_find_plain", counted)
    return reads


@pytest.mark.parametrize("origin", [CRM, MAIL], ids=["unasked", "asked"])
@pytest.mark.parametrize("size", [KEPT_MIN_CHARS, 16_384, len(LONG)])
def test_an_echoed_long_text_is_read_once_and_comes_back_tokenized(
    monkeypatch, size, origin
) -> None:
    vault = Vault()
    invoker = PrivacyInvoker(Echo(), vault, PrivacySettings())
    token = vault.tokens_for([("EMAIL", "ops@example.com")], origin)[0]
    reads = reads_of_long_text(monkeypatch)
    for round_ in range(2):  # a new text each round: nothing kept from the last one answers
        text = f"round {round_} for {token}: {LONG}"[:size]
        sent = text.replace(token, ADDRESS)  # what the tool receives, and echoes
        call = ToolCall("crm", "echo", {"text": text})
        asked = invoker.check_flows(call)
        # Asked, the check read the argument (and found the address in it); unasked, it
        # had nothing to decide and read nothing.
        assert reads == [len(sent)] * (round_ + (origin is MAIL))
        assert (asked is not None and asked.tokens == {token}) is (origin is MAIL)
        with flows_approved(asked.tokens if asked is not None else frozenset()):
            echoed = invoker.invoke(call, timeout_s=5)
        assert reads == [len(sent)] * (round_ + 1)
        # Every place, and a cut of the address where the text ends inside one.
        assert "ops@example" not in echoed
        assert echoed.count(token) >= text.count("ops@example.com") > 0


def test_places_kept_by_hash_are_the_places_a_new_reading_finds() -> None:
    vault = Vault()
    vault.tokens_for([("EMAIL", "ops@example.com"), ("PHONE", "+49 30 1234567")], CRM)
    text = LONG.replace("Questions", "Call +49 30 1234567 with questions", 7)
    recall = Recall(vault)
    recall.refresh()
    digest = content_digest(text)
    fresh = recall.find(text, decode=False)
    assert len(fresh) == LONG.count("@") + 7
    assert recall.find(text, decode=False, digest=digest) == fresh  # read, and kept
    assert recall.find(text, decode=False, digest=digest) == fresh  # answered from the kept
    entries = recall.entries_in(text, digest=digest)
    assert {entry.value for entry in entries} == {"ops@example.com", "+49 30 1234567"}


def test_a_value_added_to_the_vault_is_found_in_text_kept_before() -> None:
    vault = Vault()
    vault.tokens_for([("EMAIL", "ops@example.com")], CRM)
    text = LONG + "Escalations to boss@example.com.\n"
    recall = Recall(vault)
    recall.refresh()
    digest = content_digest(text)
    assert {hit.entry.value for hit in recall.find(text, digest=digest)} == {"ops@example.com"}
    vault.tokens_for([("EMAIL", "boss@example.com")], CRM)
    recall.refresh()
    found = {hit.entry.value for hit in recall.find(text, digest=digest)}
    assert found == {"ops@example.com", "boss@example.com"}


def test_the_kept_places_are_let_go_with_the_caches(monkeypatch) -> None:
    vault = Vault()
    invoker = PrivacyInvoker(Echo(), vault, PrivacySettings())
    token = vault.tokens_for([("EMAIL", "ops@example.com")], MAIL)[0]
    reads = reads_of_long_text(monkeypatch)
    call = ToolCall("crm", "echo", {"text": f"for {token}: {LONG}"})
    asked = invoker.check_flows(call)
    assert asked is not None and len(reads) == 1
    invoker.drop_caches()
    with flows_approved(asked.tokens):
        invoker.invoke(call, timeout_s=5)
    assert len(reads) == 2  # the kept reading went with the caches: the result is read anew


def test_the_places_of_a_few_long_texts_are_kept_not_of_every_one() -> None:
    vault = Vault()
    vault.tokens_for([("EMAIL", "ops@example.com")], CRM)
    recall = Recall(vault)
    recall.refresh()
    for number in range(20):
        text = f"report {number}\n{LONG}"
        recall.find(text, digest=content_digest(text))
    assert 1 <= len(recall._kept) <= 4


def test_an_echoed_long_text_is_hashed_once_per_call_and_each_new_text_again(monkeypatch) -> None:
    from codemode.privacy import detectors, digests

    hashed: list[int] = []
    digest_of = digests.content_digest

    def counted(text: str) -> bytes:
        hashed.append(len(text))
        return digest_of(text)

    monkeypatch.setattr(digests, "content_digest", counted)  # the call's texts
    monkeypatch.setattr(detectors, "content_digest", counted)  # the scan's cache
    vault = Vault()
    invoker = PrivacyInvoker(Echo(), vault, PrivacySettings())
    token = vault.tokens_for([("EMAIL", "ops@example.com")], CRM)[0]
    for round_ in range(2):
        text = f"round {round_} for {token}: {LONG}"
        call = ToolCall("crm", "echo", {"text": text})
        assert invoker.check_flows(call) is None
        echoed = invoker.invoke(call, timeout_s=5)
        sent = len(text.replace(token, ADDRESS))
        assert hashed == [sent] * (round_ + 1)  # the argument; its echo is not hashed again
        assert "ops@example" not in echoed and token in echoed


class Changes:
    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        return call.arguments["text"].replace("shipped", "delivered")


def test_a_result_that_differs_from_the_argument_by_a_word_is_read_as_new_text() -> None:
    vault = Vault()
    invoker = PrivacyInvoker(Changes(), vault, PrivacySettings())
    token = vault.tokens_for([("EMAIL", "ops@example.com")], CRM)[0]
    text = LONG + "Escalations to boss@example.com.\n"
    call = ToolCall("crm", "echo", {"text": text})
    invoker.check_flows(call)
    changed = invoker.invoke(call, timeout_s=5)
    assert "delivered" in changed and "ops@example" not in changed and token in changed
    assert "boss@example.com" not in changed  # found in the changed text: its own reading


def test_a_call_keeps_a_few_of_its_texts_to_compare_and_hashes_the_rest() -> None:
    from codemode.privacy.digests import TextDigests, content_digest

    digests = TextDigests()
    texts = [f"{n:05d}" + "x" * 5000 for n in range(3 * TextDigests.KEPT)]  # one length
    assert [digests.of(text) for text in texts] == [content_digest(text) for text in texts]
    # Only the first few are kept to compare with: a result's text is compared with those.
    assert sum(len(kept) for kept in digests._by_length.values()) == TextDigests.KEPT
    assert digests.of("".join(texts[0]), keep=False) == content_digest(texts[0])
    assert digests.of(texts[-1], keep=False) == content_digest(texts[-1])


def decodings_of_long_text(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every search of a text of KEPT_MIN_CHARS or more for hex and base64 runs, by length
    (by the recall or by the tokenizer)."""
    import codemode.privacy.recall as recall_module
    import codemode.privacy.tokenizer as tokenizer_module

    searched: list[int] = []
    plain = recall_module.encoded_runs

    def counted(text: str, *, shortest: int) -> Any:
        if len(text) >= KEPT_MIN_CHARS:
            searched.append(len(text))
        return plain(text, shortest=shortest)

    monkeypatch.setattr(recall_module, "encoded_runs", counted)
    monkeypatch.setattr(tokenizer_module, "encoded_runs", counted)
    return searched


def test_an_echoed_long_text_is_searched_for_encoded_values_once(monkeypatch) -> None:
    """The argument's check and the echoed result's tokenizing both look into the runs of hex
    and base64: one search serves both, and what it found is what a new search finds (the
    address in base64 is replaced in the result by its token)."""
    import base64

    vault = Vault()
    invoker = PrivacyInvoker(Echo(), vault, PrivacySettings())
    token = vault.tokens_for([("EMAIL", "ops@example.com")], CRM)[0]
    hidden = base64.b64encode(b"write to ops@example.com").decode()
    searched = decodings_of_long_text(monkeypatch)
    for round_ in range(2):
        text = f"round {round_} for {token}: {LONG[:8192]} blob {hidden} end"
        call = ToolCall("crm", "echo", {"text": text})
        invoker.check_flows(call)
        echoed = invoker.invoke(call, timeout_s=5)
        assert searched == [len(text.replace(token, ADDRESS))] * (round_ + 1)
        assert hidden not in echoed and token in echoed.split(" blob ")[1]
    invoker.drop_caches()  # the decoded runs go with the caches: the next call searches anew
    invoker.invoke(ToolCall("crm", "echo", {"text": text}), timeout_s=5)
    assert len(searched) == 3


def test_runs_decoded_once_are_the_runs_a_new_search_finds() -> None:
    import base64

    from codemode.privacy.encoded import encoded_runs

    recall = Recall(Vault())
    text = LONG[:8192] + " ".join(
        [base64.b64encode(b"mail ops@example.com now").decode(), "6f70734065782e636f6d", "Zm9v"]
    )
    digest = content_digest(text)
    for shortest in (4, 6, 20):
        expected = list(encoded_runs(text, shortest=shortest))
        assert list(recall.encoded(text, shortest=shortest, digest=digest)) == expected
    short = list(recall.encoded(text, shortest=1, digest=digest))
    assert short == list(encoded_runs(text, shortest=1))

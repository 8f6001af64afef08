"""The vault: stable tokens per session, no collisions, sources, thread safety, wipe."""

from __future__ import annotations

import gc
import threading

import pytest

from codemode.privacy.vault import TokenSource, Vault, VaultEntry

CRM = TokenSource("crm", "list_contacts", "contacts[0].email")
DOCS = TokenSource("docs", "read", "text")


def test_same_value_same_token_and_counters_per_kind() -> None:
    vault = Vault()
    assert vault.token_for("EMAIL", "a@example.com", CRM) == "<EMAIL_1>"
    assert vault.token_for("EMAIL", "b@example.com", CRM) == "<EMAIL_2>"
    assert vault.token_for("PHONE", "+1 415 555 0142", CRM) == "<PHONE_1>"
    assert vault.token_for("EMAIL", "a@example.com", DOCS) == "<EMAIL_1>"
    # the value keeps its first token whatever kind finds it later
    assert vault.token_for("CONTACT", "a@example.com", DOCS) == "<EMAIL_1>"
    assert vault.value_of("<EMAIL_2>") == "b@example.com"
    assert vault.token_of("+1 415 555 0142") == "<PHONE_1>"
    assert vault.value_of("<EMAIL_9>") is None
    assert len(vault) == 3


def test_numbers_keep_their_type_and_differ_from_text() -> None:
    vault = Vault()
    number = vault.token_for("ACCOUNT", 12345, CRM)
    text = vault.token_for("ACCOUNT", "12345", CRM)
    assert number != text
    assert vault.value_of(number) == 12345
    assert isinstance(vault.value_of(number), int)


def test_sources_and_origins_are_remembered() -> None:
    vault = Vault()
    token = vault.token_for("EMAIL", "a@example.com", CRM)
    vault.token_for("EMAIL", "a@example.com", DOCS)
    entry = vault.lookup(token)
    assert entry is not None
    assert entry.origins == {"crm", "docs"}
    assert entry.sources == [CRM, DOCS]
    assert CRM.describe() == "crm.list_contacts at contacts[0].email"


def test_a_server_that_was_sent_the_value_does_not_become_an_origin() -> None:
    vault = Vault()
    token = vault.token_for("EMAIL", "a@example.com", CRM)
    vault.mark_delivered(token, "mail")
    vault.token_for("EMAIL", "a@example.com", TokenSource("mail", "add_subscriber", "email"))
    entry = vault.lookup(token)
    assert entry is not None
    assert entry.origins == {"crm"}


def test_reserved_names_are_never_issued() -> None:
    vault = Vault()
    vault.reserve("<EMAIL_1>")
    vault.reserve("<EMAIL_2>")
    assert vault.token_for("EMAIL", "a@example.com", CRM) == "<EMAIL_3>"
    assert not vault.issued("<EMAIL_1>")
    assert vault.issued("<EMAIL_3>")


def test_wipe_forgets_everything() -> None:
    vault = Vault()
    vault.reserve("<EMAIL_1>")
    token = vault.token_for("EMAIL", "a@example.com", CRM)
    version = vault.version
    vault.wipe()
    assert len(vault) == 0
    assert vault.value_of(token) is None
    assert vault.token_of("a@example.com") is None
    assert list(vault.entries()) == []
    assert vault.version > version
    assert vault.token_for("EMAIL", "b@example.com", CRM) == "<EMAIL_1>"


def test_repr_shows_no_values() -> None:
    vault = Vault()
    vault.token_for("EMAIL", "secret.person@example.com", CRM)
    assert "example.com" not in repr(vault)
    assert "1 tokens" in repr(vault)


def test_concurrent_issuing_is_consistent() -> None:
    vault = Vault()
    values = [f"user{i}@example.com" for i in range(200)]
    results: list[dict[str, str]] = []
    start = threading.Barrier(8)

    def work() -> None:
        start.wait(timeout=10)
        results.append({v: vault.token_for("EMAIL", v, CRM) for v in values})

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(results) == 8
    assert all(result == results[0] for result in results)
    assert len(set(results[0].values())) == 200
    assert len(vault) == 200


def test_bad_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="upper-case"):
        Vault().token_for("email", "a@example.com", CRM)


def test_tokens_for_is_token_for_of_each_value_in_turn() -> None:
    values: list[tuple[str, str | int]] = [
        ("EMAIL", "a@example.com"),
        ("PHONE", "+1 415 555 0142"),
        ("EMAIL", "a@example.com"),
        ("CONTACT", "a@example.com"),  # a known value keeps its first token
        ("NUMBER", 4417),
        ("NAME", "4417"),
    ]
    paths = [TokenSource("crm", "get", f"rows[{n}]") for n in range(10)]
    one, batch = Vault(), Vault()
    for vault in (one, batch):
        vault.reserve("<EMAIL_1>")
        vault.token_for("EMAIL", "sent@example.com", CRM)
        vault.mark_delivered("<EMAIL_2>", "docs")
    for source in [*paths, DOCS]:  # more sources than are kept, and a server it was sent to
        items = [*values, ("EMAIL", "sent@example.com")]
        assert batch.tokens_for(items, source) == [one.token_for(k, v, source) for k, v in items]
    assert [vars_of(entry) for entry in batch.entries()] == [
        vars_of(entry) for entry in one.entries()
    ]
    assert batch.version == one.version
    with pytest.raises(ValueError, match="upper-case"):
        batch.tokens_for([("EMAIL", "c@example.com"), ("bad kind", "x")], DOCS)
    assert batch.token_of("c@example.com") == "<EMAIL_4>"  # as one by one: issued, then refused


def vars_of(entry: VaultEntry) -> tuple[object, ...]:
    return (entry.token, entry.kind, entry.value, entry.origins, entry.delivered, entry.sources)


class Unhashable(str):
    """Text whose hash must not be taken (a MB's hash costs 0.3 ms)."""

    def __hash__(self) -> int:
        raise AssertionError("a text longer than every value was hashed")


def test_text_longer_than_every_value_is_no_value_without_a_hash() -> None:
    vault = Vault()
    secret = "k" * 5000
    token = vault.token_for("SECRET", secret, CRM)
    assert vault.seen_again(secret, lambda: CRM) == token
    assert vault.token_of(secret) == token
    longer = Unhashable("k" * 5001)
    assert vault.seen_again(longer, lambda: CRM) is None
    assert vault.token_of(longer) is None
    # Values issued in a batch count too; a wipe forgets how long they were.
    vault.tokens_for([("SECRET", "s" * 6000)], CRM)
    assert vault.token_of("s" * 6000) is not None
    vault.wipe()
    assert vault.seen_again(Unhashable("x" * 10), lambda: CRM) is None


def test_entries_share_their_sets_of_servers_and_keep_sources_the_collector_skips() -> None:
    vault = Vault()
    vault.tokens_for([("EMAIL", f"user{n}@example.com") for n in range(500)], CRM)
    vault.tokens_for([("EMAIL", f"user{n}@example.com") for n in range(250)], DOCS)
    vault.mark_delivered(vault.token_of("user0@example.com") or "", "mail")
    gc.collect()
    gc.collect()  # the inner tuples of text are let go by the first, the outer ones by this
    entries = list(vault.entries())
    # One set object per distinct set of servers, whatever the number of entries.
    assert len({id(entry.origins) for entry in entries}) == 2
    assert len({id(entry.delivered) for entry in entries}) == 2
    assert entries[0].delivered == {"mail"} and entries[1].delivered == frozenset()
    assert entries[0].origins == {"crm", "docs"} and entries[-1].origins == {"crm"}
    # Sources are tuples of text: after collections the collector no longer walks them.
    assert not any(gc.is_tracked(entry.seen_at) for entry in entries)
    assert entries[0].sources == [CRM, DOCS]

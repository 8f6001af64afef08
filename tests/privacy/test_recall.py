"""Recall: a known value's fragments are found in any later text, whatever the case and the
separators, and what many values share (a domain, an area code, a name's words) is not a
fragment."""

from __future__ import annotations

import random
import string

from codemode.privacy import TokenSource, Vault
from codemode.privacy.recall import Recall, skeleton

SOURCE = TokenSource("crm", "get", "email")


def recall_of(*values: tuple[str, str]) -> Recall:
    vault = Vault()
    for kind, value in values:
        vault.token_for(kind, value, SOURCE)
    recall = Recall(vault)
    recall.refresh()
    return recall


def test_every_fragment_the_rules_allow_is_found() -> None:
    rng = random.Random(1)
    for _ in range(300):
        local = "".join(rng.choice(string.ascii_lowercase + ".") for _ in range(12)).strip(".")
        email = f"{local or 'ab'}@globex.example.com"
        phone = f"+44 20 7946 {rng.randint(1000, 9999)}"
        recall = recall_of(("EMAIL", email), ("PHONE", phone), ("NAME", "Chloe Chen"))
        for known in recall._known:
            value = skeleton(str(known.entry.value))
            start = rng.randint(0, known.first_end - 1)
            end = max(start + known.minimum, known.last_start + 1)
            if known.local and start > 0:  # a cut inside the local part must cross the @
                end = max(end, known.local + 3)
            if end > len(value):
                continue
            text = "see " + "-".join(value[start:end].upper()) + " now"
            hits = recall.find(text)
            assert [hit.entry.token for hit in hits] == [known.entry.token], (known, text)


def test_shared_parts_are_not_fragments() -> None:
    recall = recall_of(("EMAIL", "maria.255@example.com"), ("PHONE", "+44 20 7946 0958"))
    for text in ("write to 5@example.com", "john.55@example.org", "call +44 20 7946 1111"):
        assert recall.find(text) == [], text
    assert [hit.entry.kind for hit in recall.find("id 255-example-com")] == ["EMAIL"]
    assert [hit.entry.kind for hit in recall.find("tel 7946 0958")] == ["PHONE"]


def test_a_wiped_vault_is_forgotten() -> None:
    vault = Vault()
    vault.token_for("EMAIL", "maria.lopez@globex.example.com", SOURCE)
    recall = Recall(vault)
    recall.refresh()
    assert recall.find("MARIA_LOPEZ")
    vault.wipe()
    recall.refresh()
    assert recall.find("MARIA_LOPEZ") == []


def test_a_name_that_shares_words_with_an_address_is_not_a_fragment() -> None:
    recall = recall_of(
        ("EMAIL", "kofi.okafor3@okafor-trading.com"),
        ("EMAIL", "maria.lopez@globex.example.com"),
        ("NAME", "12 Harbour Road"),
    )
    for text in (
        "Kofi Okafor",
        "SELECT 'Kofi Okafor'",
        "Kofi Okafor from Okafor Trading called",
        "Maria Lopez emailed us",  # the whole local part, but as a name in a sentence
        "maria lopez globex",  # two words of the domain are not three characters of it
        "40 Harbour Road",
        "okafor-trading.com",
    ):
        assert recall.find(text) == [], text
    for text, kind in (
        ("MARIA_LOPEZ", "EMAIL"),
        ("maria.lopez@glo", "EMAIL"),
        ("kofi okafor3 at okafor trading dot com", "EMAIL"),
        ("kofiokafor3", "EMAIL"),
        ("12 Harbour Ro", "NAME"),
        ("12-harbour-road", "NAME"),
    ):
        assert [hit.entry.kind for hit in recall.find(text)] == [kind], text


def test_entries_in_are_the_values_find_finds_each_once() -> None:
    email, phone = "maria.lopez@globex.example.com", "+49 30 1234567"
    recall = recall_of(("EMAIL", email), ("PHONE", phone), ("NAME", "Kofi Okafor"))
    long_text = f"call {phone} or write to {email}. " * 20_000  # past the fragment scan
    for text in (
        f"write to {email} or {email}, then MARIA-LOPEZ-GLOBEX",
        long_text + "Kofi Okafor " + email.encode().hex(),
        f"{phone}; {email.encode().hex()}",
        "nothing here",
    ):
        for detected in (frozenset(), frozenset({"EMAIL", "PHONE"})):
            found = {hit.entry.token: hit.entry for hit in recall.find(text, detected=detected)}
            assert recall.entries_in(text, detected=detected) == list(found.values())
    assert len(recall.entries_in(long_text)) == 2

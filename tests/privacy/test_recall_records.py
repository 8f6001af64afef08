"""Reading records again and again: what the recall and the tokenizer skip for speed changes no
answer, and a read costs the same whatever the vault already holds.

A CRM's addresses share their domain and the ends of their local parts, its phone numbers their
area codes: before, every new address in a result was judged against each address of the vault
that shared a run with it, and the tenth read of 5,000 contacts took ten times the first."""

from __future__ import annotations

import contextlib
import gc
import random
from collections.abc import Iterator
from typing import Any

import pytest

from codemode.privacy import DetectorSet, TokenSource, Vault
from codemode.privacy import recall as recall_module
from codemode.privacy import tokenizer as tokenizer_module
from codemode.privacy.recall import Recall, skeleton
from codemode.privacy.tokenizer import Tokenizer

SOURCE = TokenSource("crm", "list_contacts", "contacts[]")
LOCALS = [
    "maria.lopez",
    "m.lopez",
    "lopez",
    "ria.lopez",
    "kofi",
    "kofi.annan",
    "user1000",
    "user10",
]
DOMAINS = ["globex.example.com", "example0.com", "acme.io"]


def addresses(rng: random.Random, count: int) -> list[str]:
    """Addresses made to share: numbered users, suffixes of one another, common domains."""
    found = []
    for _ in range(count):
        local = rng.choice(LOCALS)
        if rng.random() < 0.5:
            local += str(rng.randint(0, 120))
        found.append(f"{local}@{rng.choice(DOMAINS)}")
    return found


def phones(rng: random.Random, count: int) -> list[str]:
    """Numbers sharing their area codes and first digits; some long (up to 15 digits), whose
    cuts start where none of their indexed grams does."""
    return [
        f"+49 30 {rng.randint(100, 130)}{rng.randint(1000, 1030)}"
        + (f" {rng.randint(10, 9999)}" if rng.random() < 0.4 else "")
        for _ in range(count)
    ]


def single_value_texts(rng: random.Random, known: list[str]) -> Iterator[str]:
    """Field values that are one value each: new ones sharing runs with the known ones, the
    known ones and cuts of them, written as they are, in capitals, quoted or spelled out."""
    for _ in range(600):
        choice = rng.random()
        if choice < 0.3:  # a cut of a known value: its end, or a piece of it
            value = rng.choice(known)
            start = rng.randint(0, len(value) // 2)
            end = len(value) if rng.random() < 0.5 else rng.randint(start, len(value))
            value = value[start:end]
        elif choice < 0.6:
            value = addresses(rng, 1)[0]
        elif choice < 0.8:
            value = phones(rng, 1)[0]
        else:
            value = rng.choice(known)
        style = rng.random()
        if style < 0.15:
            value = value.upper()
        elif style < 0.3:
            value = f'"{value}"'
        elif style < 0.4:
            value = value.replace("@", " at ").replace(".", " dot ")
        elif style < 0.5:
            value = f" {value}. "
        yield value


def filled_recall(rng: random.Random) -> tuple[Recall, list[str]]:
    known = addresses(rng, 400) + phones(rng, 200)
    vault = Vault()
    vault.tokens_for([("EMAIL" if "@" in v else "PHONE", v) for v in known], SOURCE)
    recall = Recall(vault)
    recall.refresh()
    return recall, known


def covers(text: str, start: int, end: int) -> bool:
    return not skeleton(text[:start]) and not skeleton(text[end:])


def test_covering_finds_every_fragment_that_takes_in_the_whole_text() -> None:
    rng = random.Random(12)
    recall, known = filled_recall(rng)
    compared = covered = 0
    for text in single_value_texts(rng, known):
        everything = recall.find(text, decode=False)
        expected = [hit for hit in everything if covers(text, hit.start, hit.end)]
        assert recall.find(text, decode=False, covering=True) == expected, text
        compared += bool(everything)
        covered += bool(expected)
    assert compared > 200 and covered > 100  # the texts do meet fragments, covering or not


def test_judging_only_runs_that_may_be_cuts_finds_what_judging_every_run_finds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(13)
    recall, known = filled_recall(rng)
    texts = list(single_value_texts(rng, known))
    texts += [f"write to {a} or {b} today" for a, b in zip(texts[::2], texts[1::2], strict=False)]
    found = [recall.find(text) for text in texts]
    assert sum(bool(hits) for hits in found) > 300
    monkeypatch.setattr(recall_module, "may_cut", lambda _known, _span: True)
    assert [recall.find(text) for text in texts] == found


def test_a_new_address_is_not_compared_with_every_address_that_shares_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    vault = Vault()
    vault.tokens_for([("EMAIL", f"user{n}000@example0.com") for n in range(1, 3000)], SOURCE)
    recall = Recall(vault)
    recall.refresh()
    calls = 0
    common_run = recall_module.common_run

    def counted(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        return common_run(*args)

    monkeypatch.setattr(recall_module, "common_run", counted)
    text = "user5000000@example0.com"  # ends as 2,999 addresses of the vault end: 000@example0
    assert recall.find(text, decode=False, covering=True) == []
    assert calls <= 8
    calls = 0
    recall.find(text, decode=False)  # every fragment, as in free text: each one is looked at
    assert calls > 1000


def records(seed: int, count: int = 200) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {
            "id": f"c{seed * count + n}",
            "name": rng.choice(["Maria Lopez", "Kofi Annan", "Ana Silva"]),
            "email": f"user{seed * count + n}@example{n % 7}.com",
            "phone": f"+49 30 {rng.randint(1_000_000, 9_999_999)}",
            "city": rng.choice(["Berlin", "Paris", "Oslo"]),
            "note": rng.choice(["Prefers e-mail.", "Call <PHONE_3> first", "VIP; see <EMAIL_2>"]),
            # An address of the last read, as a slug, beside a new one: the slug is recalled.
            "cc": f"USER{(seed - 1) * count + n}_EXAMPLE{n % 7}_COM, new{n}@example.com",
        }
        for n in range(count)
    ]


def tokenized_reads(monkeypatch: pytest.MonkeyPatch, *, shortcuts: bool) -> list[Any]:
    """Five reads of new records and one read again, in one session, with this round's
    shortcuts (findings of a repeated text kept for the result, covering) or without."""
    if not shortcuts:
        monkeypatch.setattr(tokenizer_module, "_REPEATED_MAX", 0)
        monkeypatch.setattr(tokenizer_module, "_holds_all", lambda _text, _found: False)
    tokenizer = Tokenizer(DetectorSet(), {"crm": ["[].city"]})
    vault = Vault()
    reads = [
        tokenizer.tokenize(records(seed), vault, server="crm", tool="list") for seed in range(5)
    ]
    reads.append(tokenizer.tokenize(records(2), vault, server="crm", tool="list"))
    # A city hidden by the field rule is a vault value: found again in another field too.
    again = {"note": "moved to Berlin", "to": "Berlin"}
    reads.append(tokenizer.tokenize(again, vault, server="crm", tool="get"))
    monkeypatch.undo()
    return [reads, [(e.token, e.kind, e.value, sorted(e.origins)) for e in vault.entries()]]


def test_the_shortcuts_tokenize_records_as_the_plain_way_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast = tokenized_reads(monkeypatch, shortcuts=True)
    plain = tokenized_reads(monkeypatch, shortcuts=False)
    assert fast == plain
    assert fast[0][1][0]["cc"].startswith(fast[0][0][0]["email"])  # the slug: the address's token
    first = fast[0][0]
    assert first[0]["email"].startswith("<EMAIL_") and first[0]["city"].startswith("<CITY_")
    assert fast[0][-1]["to"] == first[[r["city"] for r in records(0)].index("Berlin")]["city"]


def collections_while_indexing(count: int) -> int:
    """Collections the cyclic collector starts while the recall indexes ``count`` new values,
    were it to run every 50 new objects."""
    vault = Vault()
    recall = Recall(vault)
    recall.refresh()
    vault.tokens_for([("EMAIL", f"user{n}@example{n % 9}.com") for n in range(count)], SOURCE)
    started = 0

    def record(phase: str, _info: dict[str, Any]) -> None:
        nonlocal started
        started += phase == "start"

    threshold = gc.get_threshold()
    gc.collect()  # the count of new objects starts from nothing
    gc.callbacks.append(record)
    gc.set_threshold(50)
    try:
        recall.refresh()
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(record)
    found = [hit for hit in recall.find("USER2999_EXAMPLE2_COM") if hit.whole]  # indexed
    assert [hit.entry.value for hit in found] == ["user2999@example2.com"]
    return started


def test_indexing_a_result_of_values_runs_one_collection_at_most(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Paused while it indexes: the objects made meanwhile are walked once, at the end.
    assert collections_while_indexing(3000) <= 1
    monkeypatch.setattr(recall_module, "paused_for", lambda _objects: contextlib.nullcontext())
    assert collections_while_indexing(3000) > 20


def test_entries_after_gives_what_an_index_lacks_or_everything_after_a_wipe() -> None:
    vault = Vault()
    vault.tokens_for([("EMAIL", f"a{n}@x.io") for n in range(5)], SOURCE)
    wiped, newest = vault.entries_after(3)
    assert not wiped and [e.value for e in newest] == ["a3@x.io", "a4@x.io"]
    assert vault.entries_after(5) == (False, [])
    vault.wipe()
    vault.tokens_for([("EMAIL", "b@x.io")], SOURCE)
    wiped, every = vault.entries_after(5)
    assert wiped and [e.value for e in every] == ["b@x.io"]


def test_a_text_repeated_in_a_result_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    findings = tokenizer_module._Walk._findings

    def counted(walk: Any, text: str, digest: bytes | None) -> Any:
        read.append(text)
        return findings(walk, text, digest)

    monkeypatch.setattr(tokenizer_module._Walk, "_findings", counted)
    rows = [{"city": "Berlin", "note": "call +49 30 1234567", "n": str(n % 3)} for n in range(500)]
    out = Tokenizer(DetectorSet()).tokenize(rows, Vault(), server="crm", tool="list")
    assert sorted(read) == ["0", "1", "2", "Berlin", "call +49 30 1234567"]
    assert {row["note"] for row in out} == {"call <PHONE_1>"}  # found once, replaced each time

"""A note that names a new address is not compared with every address of the vault that ends
as it does, and skipping those comparisons changes no tokenized result.

The tokenizer merges the recall's hits with the detectors' findings, the longer span winning.
Inside a note (``wrote to user99999007@example7.com about it``) the detectors find the new
address; every address of the vault ending in ``007@example7.com`` is a fragment there by the
recall's rules, and each lost to the address. Judged one by one, they made a CRM's notes
slower with every address read (``codemode.privacy.shadows``)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from codemode.privacy import DetectorSet, TokenSource, Vault
from codemode.privacy import recall as recall_module
from codemode.privacy.recall import Recall
from codemode.privacy.shadows import Shadows
from codemode.privacy.tokenizer import Tokenizer

SOURCE = TokenSource("crm", "list_contacts", "contacts[]")
NOTE = "Called Maria, wrote to user99999007@example7.com about the order."


def shared_tails(count: int) -> Vault:
    """``count`` addresses that all end as the note's new address does."""
    vault = Vault()
    vault.tokens_for([("EMAIL", f"user{n}007@example7.com") for n in range(1, count)], SOURCE)
    return vault


def judged(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A counter of the recall's ``judge`` calls (each one a run judged as a cut)."""
    calls = [0]
    judge = recall_module.judge

    def counted(*args: Any) -> Any:
        calls[0] += 1
        return judge(*args)

    monkeypatch.setattr(recall_module, "judge", counted)
    return calls


def no_shadows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recall_module.Shadows, "of", classmethod(lambda *_args: None))


def test_a_note_naming_a_new_address_judges_none_of_the_addresses_sharing_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recall = Recall(shared_tails(3000))
    recall.refresh()
    start = NOTE.index("user")
    address = (start, NOTE.index(" about"))
    calls = judged(monkeypatch)
    everything = recall.find(NOTE, decode=False)
    assert calls[0] > 1000 and len(everything) > 1000  # each one a cut inside the address
    assert all(address[0] < hit.start and hit.end <= address[1] for hit in everything)
    calls[0] = 0
    assert recall.find(NOTE, decode=False, shadows=[address]) == []
    assert calls[0] == 0


def test_the_note_is_tokenized_as_it_was_and_costs_the_same_however_many_addresses_share_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    results = []
    for count in (30, 3000):
        vault = shared_tails(count)
        tokenizer = Tokenizer(DetectorSet())
        calls = judged(monkeypatch)
        results.append(tokenizer.tokenize({"note": NOTE}, vault, server="crm", tool="get"))
        assert calls[0] <= 2
        monkeypatch.undo()
        no_shadows(monkeypatch)
        plain = Tokenizer(DetectorSet()).tokenize({"note": NOTE}, vault, server="crm", tool="get")
        monkeypatch.undo()
        assert plain == results[-1]
    assert results[0]["note"] == "Called Maria, wrote to <EMAIL_30> about the order."


def test_printed_output_naming_new_addresses_is_read_as_quickly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Output the code prints is scanned the same way (``Tokenizer.scan_text``), also when it
    is longer than the texts whose places the recall keeps (``KEPT_MIN_CHARS``)."""
    vault = shared_tails(1000)
    filler = "as agreed on the phone, with the invoice and the delivery notes attached " * 2
    lines = [f"{n}: wrote to user9999{n}007@example7.com {filler}" for n in range(30)]
    printed = "\n".join(lines)
    assert len(printed) > recall_module.KEPT_MIN_CHARS
    source = TokenSource("<output>", "", "")
    calls = judged(monkeypatch)
    scanned = Tokenizer(DetectorSet()).scan_text(printed, vault, source=source)
    assert calls[0] <= 2
    monkeypatch.undo()
    no_shadows(monkeypatch)
    assert Tokenizer(DetectorSet()).scan_text(printed, vault, source=source) == scanned
    assert scanned.splitlines()[0] == f"0: wrote to <EMAIL_1000> {filler}"


def test_a_longer_value_across_the_address_makes_the_recall_search_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A value of the vault that runs into the address from before it and is longer wins over
    the address in the merge: the cuts after it, inside the address, are kept then, and a
    search that skipped them must not leave that part of the address in clear."""
    answers: list[bool] = []
    overtaken = Shadows.overtaken

    def answered(self: Shadows, hits: Any) -> bool:
        answers.append(overtaken(self, hits))
        return answers[-1]

    def note_read() -> list[Any]:
        vault = shared_tails(300)
        tokenizer = Tokenizer(DetectorSet(), {"crm": ["memo"]})
        tokenizer.tokenize(
            {"memo": "Called Lars, wrote to user9999"}, vault, server="crm", tool="a"
        )
        note = {"note": "Called Lars, wrote to user99999007@example7.com about it."}
        return [tokenizer.tokenize(note, vault, server="crm", tool="b"), len(vault)]

    monkeypatch.setattr(Shadows, "overtaken", answered)
    skipping = note_read()
    monkeypatch.undo()
    assert True in answers  # the longer value overlapped the address a cut was skipped inside
    no_shadows(monkeypatch)
    assert note_read() == skipping
    assert skipping[0]["note"].startswith("<MEMO_1>") and "example7" not in skipping[0]["note"]


# --- the same answers, skipping or not ------------------------------------------------------

FIRST = ["Maria", "Kofi", "Aiko", "Lars", "Olivia", "Rowan"]
LAST = ["Lopez", "Okafor", "Tanaka", "Berg", "Brown"]
DOMAINS = ["example", "globex", "olivia-trading", "x"]


def corpus(seed: int, reads: int) -> list[list[dict[str, Any]]]:
    """Reads of records whose notes name addresses and numbers, new ones and ones read before,
    whole, cut, in capitals, spelled out, as slugs, doubled: what makes the skipped runs'
    hits matter (a value found again across a detection, a value met again elsewhere)."""
    rng = random.Random(seed)
    seen: list[str] = []

    def email(n: int) -> str:
        first, last = rng.choice(FIRST).lower(), rng.choice(LAST).lower()
        local = rng.choice(
            [f"user{n}", f"{first}.{last}", f"{first}{n % 100}", f"{last}_{first[0]}"]
        )
        return f"{local}@{rng.choice(DOMAINS)}{rng.choice(['', str(n % 10)])}.com"

    def phone(n: int) -> str:
        return rng.choice([f"+49 30 {1_000_000 + n * 7919 % 9_000_000}", f"+1 415 555 {n:04d}"])

    def changed(value: str) -> str:
        return rng.choice(
            [
                value.upper(),
                value[len(value) // 3 :],
                value[: 2 * len(value) // 3],
                value.replace("@", " at ").replace(".", " dot "),
                "doc-" + "".join(c if c.isalnum() else "-" for c in value.lower()),
                value.replace("@", "@@"),
                value,
                value + value[-6:],
            ]
        )

    def note(n: int) -> str:
        parts = ["Called", rng.choice(FIRST), "wrote to", email(n + 7), "about it", phone(n)]
        for _ in range(rng.randint(0, 2)):
            if seen:
                parts.insert(rng.randrange(len(parts) + 1), changed(rng.choice(seen)))
        return rng.choice([" ", ", ", "\n", ""]).join(parts)

    out = []
    for read in range(reads):
        rows = []
        for i in range(60):
            n = read * 100 + i
            address, number = email(n), phone(n)
            rows.append({"id": f"c{n}", "email": address, "phone": number, "note": note(n)})
            seen += [address, number]
        out.append(rows)
    return out


def tokenized(reads: list[list[dict[str, Any]]]) -> list[Any]:
    tokenizer = Tokenizer(DetectorSet())
    vault = Vault()
    results: list[Any] = [
        tokenizer.tokenize(rows, vault, server="crm", tool="list") for rows in reads
    ]
    printed = "\n".join(row["note"] for row in reads[-1])  # longer than KEPT_MIN_CHARS
    results.append(tokenizer.scan_text(printed, vault, source=TokenSource("<output>", "", "")))
    return [results, [(e.token, e.kind, e.value) for e in vault.entries()]]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_skipping_runs_inside_detections_changes_no_tokenized_result(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    reads = corpus(seed, 12)
    made: list[Shadows] = []
    answers: list[bool] = []
    of, overtaken = Shadows.of.__func__, Shadows.overtaken  # type: ignore[attr-defined]

    def recorded(cls: type[Shadows], *args: Any) -> Shadows | None:
        shadows = of(cls, *args)
        if shadows is not None:
            made.append(shadows)
        return shadows

    def answered(self: Shadows, hits: Any) -> bool:
        answers.append(overtaken(self, hits))
        return answers[-1]

    monkeypatch.setattr(Shadows, "of", classmethod(recorded))
    monkeypatch.setattr(Shadows, "overtaken", answered)
    skipping = tokenized(reads)
    monkeypatch.undo()
    no_shadows(monkeypatch)
    assert tokenized(reads) == skipping
    # Runs were skipped, and both reasons to search again were met.
    assert sum(bool(shadows.pruned) for shadows in made) > 100
    assert any(shadows.spoiled for shadows in made) and any(answers)


# --- the spans themselves ---------------------------------------------------------------------


def test_a_span_holds_only_what_lies_strictly_inside_it() -> None:
    text = "to Maria.Lopez@x.com now"  # the skeleton: tomarialopezxcomnow
    shadows = Shadows.of([(3, 20)], text, text.lower())
    assert shadows is not None
    assert shadows.holding(2, 14) == 0  # inside, shorter: "marialopezxc"
    assert shadows.holding(2, 16) is None  # the whole address: as long, not skipped
    assert shadows.holding(1, 10) is None  # starts before it
    assert shadows.holding(10, 17) is None  # ends after it
    assert shadows.skip(7, 2, 14) and shadows.pruned == {0} and shadows.skipped_values == {7}
    assert not shadows.skip(8, 0, 19) and shadows.skipped_values == {7}


def test_spans_are_not_used_where_the_merge_or_the_offsets_could_differ() -> None:
    assert Shadows.of([], "abc", "abc") is None
    assert Shadows.of([(0, 5), (3, 8)], "x" * 10, "x" * 10) is None  # overlapping findings
    text = "İstanbul user@example.com"  # lower-cased, "İ" becomes two characters
    assert len(text.lower()) != len(text)
    assert Shadows.of([(9, 25)], text, text.lower()) is None
    assert Shadows.of([(9, 25), (0, 8)], "x" * 25, "x" * 25) is not None  # sorted first


def test_a_longer_or_as_long_hit_across_a_skipped_span_asks_for_a_search_again() -> None:
    text = "wrote to user99999007@example7.com about"
    address = (9, 34)
    shadows = Shadows.of([address], text, text.lower())
    assert shadows is not None
    assert not shadows.overtaken([(0, 40)])  # nothing was skipped inside it
    assert shadows.skip(1, 12, 25)
    assert not shadows.overtaken([address])  # the same span: every skipped hit overlaps it
    assert not shadows.overtaken([(12, 30), (0, 5)])  # shorter, or apart
    assert shadows.overtaken([(20, 45)])  # as long, across its end
    assert shadows.overtaken([(0, 30)])  # longer, across its start

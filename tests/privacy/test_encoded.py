"""Values a tool hands over in hex or base64 (``hex(email)`` from a SQL tool) are tokenized
like the value itself, whether the vault knew the value or not; ordinary text, hashes, ids
and numbers are left alone."""

from __future__ import annotations

import base64
import hashlib
import random
import re

import pytest

from codemode.privacy import encoded as encoded_module
from codemode.privacy.detectors import DetectorSet
from codemode.privacy.encoded import encoded_runs
from codemode.privacy.recall import Recall
from codemode.privacy.tokenizer import Tokenizer
from codemode.privacy.vault import TokenSource, Vault

EMAIL = "jordan.blake@acme.example.com"
PHONE = "+1 415 555 0142"


def encodings(value: str) -> dict[str, str]:
    data = value.encode()
    return {
        "hex": data.hex(),
        "HEX": data.hex().upper(),
        "base64": base64.b64encode(data).decode(),
        "base64 unpadded": base64.b64encode(data).decode().rstrip("="),
        "urlsafe": base64.urlsafe_b64encode(data).decode(),
    }


@pytest.mark.parametrize("value", [EMAIL, PHONE])
@pytest.mark.parametrize("name", list(encodings(EMAIL)))
def test_a_value_the_vault_never_saw_is_tokenized_from_its_encoding(value: str, name: str) -> None:
    vault = Vault()
    encoded = encodings(value)[name]
    result = Tokenizer(DetectorSet()).tokenize(
        {"rows": [{"h": encoded}, {"note": f"sent as {encoded}."}]}, vault, server="db", tool="q"
    )
    token = result["rows"][0]["h"]
    assert token.startswith("<") and vault.value_of(token) == value
    assert result["rows"][1]["note"] == f"sent as {token}."


def test_the_encoding_gets_the_same_token_as_the_value() -> None:
    vault = Vault()
    tokenizer = Tokenizer(DetectorSet())
    plain = tokenizer.tokenize({"email": EMAIL}, vault, server="db", tool="q")
    hexed = tokenizer.tokenize({"h": EMAIL.encode().hex()}, vault, server="db", tool="q")
    assert plain["email"] == hexed["h"] == "<EMAIL_1>"


def test_a_value_only_the_vault_knows_is_recalled_from_its_encoding() -> None:
    # A name hidden by a named field: no detector finds it, the recall does.
    vault = Vault()
    vault.token_for("NAME", "Jordan Quillfeather", TokenSource("db", "q", "name"))
    recall = Recall(vault)
    recall.refresh()
    for encoded in encodings("Jordan Quillfeather").values():
        hits = recall.find(f"x {encoded} y")
        assert [(hit.start, hit.end, hit.entry.token) for hit in hits] == [
            (2, 2 + len(encoded), "<NAME_1>")
        ]


@pytest.mark.parametrize(
    "text",
    [
        "Order 4417 shipped to Berlin; invoice INV-0142 is due in 30 days.",
        hashlib.sha256(EMAIL.encode()).hexdigest(),  # a hash holds no value
        "id 202405021234567890 and 3141592653589793",  # numbers are not hex
        "ThisIsAnIdentifierWith2Parts and getCustomerById42",
        base64.b64encode(bytes(range(64))).decode(),  # bytes, not text
        "deadbeefcafe0123",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    vault = Vault()
    vault.token_for("EMAIL", EMAIL, TokenSource("db", "q", "email"))
    result = Tokenizer(DetectorSet()).tokenize({"t": text}, vault, server="db", tool="q")
    assert result["t"] == text


def test_what_reads_as_encoded() -> None:
    text = f"a {EMAIL.encode().hex()} b 0123456789012345 c {base64.b64encode(b'hello world!').decode()}"
    assert [decoded for _, _, decoded in encoded_runs(text, shortest=6)] == [EMAIL, "hello world!"]
    assert list(encoded_runs("x" * 100 + " " + "Ab1" * 30_000, shortest=6)) == []  # too long


def test_a_value_only_the_vault_knows_is_tokenized_from_its_encoding() -> None:
    vault = Vault()
    token = vault.token_for("NAME", "Jordan Quillfeather", TokenSource("db", "q", "name"))
    tokenizer = Tokenizer(DetectorSet())
    for encoded in encodings("Jordan Quillfeather").values():
        result = tokenizer.tokenize({"h": f"id {encoded}"}, vault, server="db", tool="q")
        assert result["h"] == f"id {token}"


def _reference_runs(text: str) -> list[tuple[int, int]]:
    """The runs as one regular expression over the whole text finds them."""
    return [
        (found.start(), found.end())
        for found in re.finditer(r"[0-9A-Za-z+/_-]{12,}", text)
        if found.end() - found.start() <= encoded_module.MAX_RUN
    ]


def test_runs_across_chunk_edges_are_found_whole_and_once():
    rng = random.Random(5)
    pieces = ["x" * 11, "y" * 12, "Zz0+/_-" * 3, " ", ".\n", "@", "ab" * 20_000, "q" * 70_000]
    for _ in range(60):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        text = text[rng.randrange(len(text)) :] if rng.random() < 0.3 else text
        assert list(encoded_module._runs(text)) == _reference_runs(text)
    # A run that ends exactly at a chunk's end, and one that starts right after it.
    chunk = encoded_module._CHUNK
    for text in ("a" * chunk + " " + "b" * 12, " " * (chunk - 5) + "c" * 20, "d" * (3 * chunk)):
        assert list(encoded_module._runs(text)) == _reference_runs(text)

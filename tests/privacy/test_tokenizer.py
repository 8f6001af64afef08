"""Tokenize results and detokenize arguments: nested data, text, named fields, token look-alikes."""

from __future__ import annotations

import copy
import json

import pytest

from codemode.privacy.detectors import DetectorSet
from codemode.privacy.fields import FieldMatcher, parse_field_pattern
from codemode.privacy.tokenizer import Tokenizer, detokenize
from codemode.privacy.vault import TokenSource, Vault, VaultEntry

NESTED = {
    "customer": {
        "name": "Jordan Blake",
        "email": "jordan.blake@acme.example.com",
        "phones": ["+1 415 555 0142", "(415) 555-0143"],
        "note": "Prefers email (jordan.blake@acme.example.com) over calls to +1 415 555 0142.",
    },
    "orders": [
        {"id": "ORD-2024-001234", "total": 1234.5, "paid": True, "card": "4111 1111 1111 1111"},
        {"id": "ORD-2024-001235", "total": 99, "paid": False, "card": None},
    ],
    "ip": "192.168.1.10",
    "count": 2,
}


def _tokenizer(fields: dict[str, list[str]] | None = None) -> Tokenizer:
    return Tokenizer(DetectorSet(), fields)


def test_nested_round_trip() -> None:
    vault = Vault()
    original = copy.deepcopy(NESTED)
    tokenized = _tokenizer().tokenize(NESTED, vault, server="crm", tool="get")
    assert NESTED == original  # the input is not modified
    text = json.dumps(tokenized)
    for value in ("jordan.blake", "415 555", "4111", "192.168"):
        assert value not in text
    customer = tokenized["customer"]
    assert customer["email"] == "<EMAIL_1>"
    assert customer["phones"] == ["<PHONE_1>", "<PHONE_2>"]
    assert customer["note"] == "Prefers email (<EMAIL_1>) over calls to <PHONE_1>."
    assert customer["name"] == "Jordan Blake"  # not a detector's business; see named fields
    assert tokenized["orders"][0] == {
        "id": "ORD-2024-001234",
        "total": 1234.5,
        "paid": True,
        "card": "<CARD_1>",
    }
    assert tokenized["ip"] == "<IP_1>"
    assert detokenize(tokenized, vault, destination="crm") == NESTED


def test_same_value_in_two_results_gets_the_same_token() -> None:
    vault = Vault()
    tokenizer = _tokenizer()
    first = tokenizer.tokenize({"email": "a@example.com"}, vault, server="crm", tool="one")
    second = tokenizer.tokenize(["x a@example.com y"], vault, server="crm", tool="two")
    assert first == {"email": "<EMAIL_1>"}
    assert second == ["x <EMAIL_1> y"]


def test_sources_record_the_field_path() -> None:
    vault = Vault()
    _tokenizer().tokenize(
        {"contacts": [{"email": "a@example.com"}, {"email": "b@example.com"}]},
        vault,
        server="crm",
        tool="list_contacts",
    )
    entry = vault.lookup("<EMAIL_2>")
    assert entry is not None
    assert entry.sources == [TokenSource("crm", "list_contacts", "contacts[1].email")]


def test_detokenize_in_text_and_whole_values() -> None:
    vault = Vault()
    source = TokenSource("crm", "t", "")
    email = vault.token_for("EMAIL", "a@example.com", source)
    number = vault.token_for("ACCOUNT", 424242, source)
    args = {
        "to": email,
        "body": f"Hello {email}, account {number}.",
        "ids": [number, "<EMAIL_99>"],
        email: "key",
        "nested": ({"x": email},),
    }
    assert detokenize(args, vault, destination="mail") == {
        "to": "a@example.com",
        "body": "Hello a@example.com, account 424242.",
        "ids": [424242, "<EMAIL_99>"],  # unknown tokens pass through unchanged
        "a@example.com": "key",
        "nested": [{"x": "a@example.com"}],
    }


def test_detokenize_asks_check_for_each_token() -> None:
    vault = Vault()
    token = vault.token_for("EMAIL", "a@example.com", TokenSource("crm", "t", ""))
    seen: list[tuple[str, str]] = []

    def check(destination: str, entry: VaultEntry) -> None:
        seen.append((destination, entry.token))

    detokenize({"a": token, "b": f"to {token}"}, vault, destination="mail", check=check)
    assert seen == [("mail", token), ("mail", token)]


def test_results_without_strings_cost_nothing() -> None:
    vault = Vault()
    tokenizer = _tokenizer()
    for value in (None, 1, 2.5, True, b"\x00 a@example.com"):
        assert tokenizer.tokenize(value, vault, server="s", tool="t") is value
    assert tokenizer.tokenize([[1, 2.0, None]], vault, server="s", tool="t") == [[1, 2.0, None]]
    assert len(vault) == 0


def test_dict_keys_are_tokenized() -> None:
    vault = Vault()
    out = _tokenizer().tokenize({"a@example.com": {"role": "admin"}}, vault, server="s", tool="t")
    assert out == {"<EMAIL_1>": {"role": "admin"}}
    assert detokenize(out, vault, destination="s") == {"a@example.com": {"role": "admin"}}


def test_secret_named_fields() -> None:
    vault = Vault()
    result = {
        "password": "hunter22",
        "db_password": "correct-horse",
        "api_key": "Zx8Kq2Lm9Pw4Rt7Yb3Nv",
        "next_token": "abc",  # too short and plain: not a secret
        "token_count": "Zx8Kq2Lm9Pw4Rt7Yb3Nv",  # not a secret name, but a value seen before
        "keyboard": "Zx8Kq2Lm9Pw4Rt7Yb3Nv",
    }
    out = _tokenizer().tokenize(result, vault, server="s", tool="t")
    assert out["password"] == "<SECRET_1>"
    assert out["db_password"] == "<SECRET_2>"
    assert out["api_key"] == "<SECRET_3>"
    assert out["next_token"] == "abc"
    assert out["token_count"] == "<SECRET_3>"  # the same value seen before keeps its token
    assert out["keyboard"] == "<SECRET_3>"
    fresh = _tokenizer().tokenize(
        {"keyboard": "Qw3Er4Ty5Ui6Op7As8Df"}, Vault(), server="s", tool="t"
    )
    assert fresh == {"keyboard": "Qw3Er4Ty5Ui6Op7As8Df"}


def test_token_lookalikes_in_results_never_collide() -> None:
    vault = Vault()
    tokenizer = _tokenizer()
    # A tool returns text that looks like a token this vault has not issued: reserved.
    first = tokenizer.tokenize(
        {"template": "Dear <EMAIL_1>,", "to": "a@example.com"}, vault, server="s", tool="t"
    )
    assert first == {"template": "Dear <EMAIL_1>,", "to": "<EMAIL_2>"}
    assert detokenize(first, vault, destination="s") == {
        "template": "Dear <EMAIL_1>,",
        "to": "a@example.com",
    }
    # Later a tool returns the name of an issued token as text: it becomes a value of its own.
    second = tokenizer.tokenize("echo <EMAIL_2>", vault, server="s", tool="t")
    assert second == "echo <EMAIL_3>"
    assert vault.value_of("<EMAIL_3>") == "<EMAIL_2>"
    assert detokenize(second, vault, destination="s") == "echo <EMAIL_2>"


def test_named_fields_are_tokenized_whole() -> None:
    vault = Vault()
    tokenizer = _tokenizer({"crm": ["contacts[].name", "*.account", "**.notes"]})
    result = {
        "contacts": [
            {"name": "Jordan Blake", "account": 1001, "email": "j@example.com"},
            {"name": "Ann Lee", "account": 1002, "profile": {"notes": ["likes golf", "VIP"]}},
        ],
        "name": "page 1",
    }
    out = tokenizer.tokenize(result, vault, server="crm", tool="list")
    assert out == {
        "contacts": [
            {"name": "<NAME_1>", "account": "<ACCOUNT_1>", "email": "<EMAIL_1>"},
            {
                "name": "<NAME_2>",
                "account": "<ACCOUNT_2>",
                "profile": {"notes": ["<NOTES_1>", "<NOTES_2>"]},
            },
        ],
        "name": "page 1",
    }
    assert detokenize(out, vault, destination="crm") == result
    # other servers' results are not touched by crm's field rules
    assert tokenizer.tokenize({"contacts": [{"name": "X Y"}]}, vault, server="docs", tool="t") == {
        "contacts": [{"name": "X Y"}]
    }


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("contacts[].email", ["contacts", "email"], True),
        ("contacts.email", ["contacts", "email"], True),
        ("*.email", ["contacts", "email"], True),
        ("*.email", ["email"], False),
        ("*.email", ["a", "b", "email"], False),
        ("**.email", ["email"], True),
        ("**.email", ["a", "b", "email"], True),
        ("[].email", ["email"], True),
        ("customer.*", ["customer", "phone"], True),
        ("customer.*", ["customer"], False),
        ("cust*.e?ail", ["customer", "email"], True),
        ("a.**", ["a", "b", "c"], True),
        ("a.**.z", ["a", "z"], True),
        ("a.**.z", ["a", "b", "y"], False),
    ],
)
def test_field_patterns(pattern: str, path: list[str], matches: bool) -> None:
    matcher = FieldMatcher([pattern])
    state = matcher.start
    for key in path:
        state = matcher.step(state, key)
    assert matcher.matched(state) is matches


@pytest.mark.parametrize("bad", ["", "a..b", "a[0].b", "a**.b", "[]", "a.[x]"])
def test_bad_field_patterns(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_field_pattern(bad)


def test_scan_text_keeps_tokens_and_maps_known_values() -> None:
    vault = Vault()
    tokenizer = _tokenizer({"crm": ["*.name"]})
    tokenizer.tokenize(
        {"c": {"name": "Jordan Blake", "email": "j@example.com"}}, vault, server="crm", tool="t"
    )
    source = TokenSource("<output>", "", "output")
    printed = "<NAME_1> <EMAIL_1>; raw: Jordan Blake j@example.com; new: z@example.org"
    assert tokenizer.scan_text(printed, vault, source=source) == (
        "<NAME_1> <EMAIL_1>; raw: <NAME_1> <EMAIL_1>; new: <EMAIL_2>"
    )


def test_long_results_kept_to_skip_a_second_scan_are_bounded_by_size() -> None:
    from codemode.privacy import PrivacySettings, Vault
    from codemode.privacy.tokenizer import _CLEARED_MAX_CHARS

    tokenizer = PrivacySettings().tokenizer()
    vault = Vault()
    size = _CLEARED_MAX_CHARS // 3
    texts = [f"report {n}: " + "all orders shipped. " * (size // 20) for n in range(6)]
    for text in texts:
        tokenizer.tokenize(text, vault, server="docs", tool="read")
    kept = tokenizer._cleared.values()
    assert 0 < sum(len(result) for _version, result in kept) <= _CLEARED_MAX_CHARS
    assert len(kept) == 2  # the newest ones
    assert tokenizer.tokenize(texts[-1], vault, server="docs", tool="read") == texts[-1]

"""Each detector: values it must find, and look-alikes it must leave alone."""

from __future__ import annotations

import pytest

from codemode.privacy.detectors import BUILTIN_KINDS, DetectorSet, default_detectors, luhn_valid

TRUE_POSITIVES: dict[str, list[str]] = {
    "EMAIL": [
        "jordan.blake@acme.example.com",
        "a.b+tag@sub.example.org",
        "X_Y-Z%1@mail-1.example.co.uk",
    ],
    "PHONE": [
        "+1 415 555 0142",
        "+31 10 555 0142",
        "+33 1 55 50 12 34",
        "+44 (0)20 7946 0958",
        "+4915112345678",
        "+1-415-555-0142",
        "(415) 555-0142",
        "415-555-0142",
        "415.555.0142",
        "1-800-555-0199",
        "020 7946 0958",
        "07700 900123",
        "030/1234567",
        "(030) 1234567",
        "01 55 50 12 34",
        "0044 20 7946 0958",
    ],
    "CARD": [
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "4012888888881881",
        "5555 5555 5555 4444",
        "2223 0031 2200 3222",
        "3782 822463 10005",
        "6011 1111 1111 1117",
    ],
    "IBAN": [
        "DE89 3704 0044 0532 0130 00",
        "DE89370400440532013000",
        "GB82 WEST 1234 5698 7654 32",
        "FR14 2004 1010 0505 0001 3M02 606",
        "NL91ABNA0417164300",
    ],
    "IP": [
        "192.168.1.10",
        "8.8.8.8",
        "10.0.0.255",
        "2001:db8::8a2e:370:7334",
        "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
        "fe80::1ff:fe23:4567:890a",
    ],
    "SSN": ["536-22-8790", "536 22 8790", "123-45-6789"],
    "UK_NINO": ["AB123456C", "AB 12 34 56 C", "JG 10 37 59 A"],
    "DE_TAX_ID": ["86095742719", "86 095 742 719", "65823451092"],
    "ES_DNI": ["87654321X", "12345678Z", "12345678-Z", "X1234567L", "Y7654321G"],
    "SECRET": [
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "sk_test_51H8xYzAbCdEfGhIjKlMnOp",
        "rk_live_51H8xYzAbCdEfGhIjKlMnOp",
        "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "xoxb-1234567890-abcdefghij",
        "xoxp-2345678901-bcdefghijk",
        "AKIAIOSFODNN7EXAMPLE",
        "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    ],
}

# Values found only after a keyword: (text, the value that must be found)
KEYWORD_SECRETS = [
    ('api_key = "Zx8Kq2Lm9Pw4Rt7Yb3Nv"', "Zx8Kq2Lm9Pw4Rt7Yb3Nv"),
    ('{"client_secret": "c0ffee1234DEADbeef5678"}', "c0ffee1234DEADbeef5678"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", None),
    ("Authorization: Bearer eyAbc123DEF456ghi789JKL", "eyAbc123DEF456ghi789JKL"),
    ("password: hunter22", "hunter22"),
    ("token=9f8e7d6c5b4a39281706f5e4d3c2b1a0", "9f8e7d6c5b4a39281706f5e4d3c2b1a0"),
]

# Look-alikes per kind: the detector of that kind must not fire.
FALSE_POSITIVES: dict[str, list[str]] = {
    "EMAIL": ["@example.com", "user@localhost", "name@1.2.3", "a@b", "email me at home"],
    "PHONE": [
        "2024-01-15",
        "15.01.2024",
        "01/02/2024",
        "01-02-2024 12:30",
        "2024-01-15T10:30:00+01:00",
        "ORD-2024-001234",
        "INV-0123-456789",
        "$1,234.56",
        "1 234 567.89",
        "0.99",
        "v1.2.3",
        "10.0.19041.1234",
        "1700000000",
        "1700000000123",
        "+12.5%",
        "UTC+05:30",
        "123-555-0142",  # area codes do not start with 1
        "415-123-4567",  # nor exchanges
        "3 + 4 = 7",
        "0001-2345-6789",
    ],
    "CARD": [
        "4111 1111 1111 1112",  # Luhn fails
        "1234 5678 9012 3456",  # no issuer starts with 1
        "1700000000123",
        "4444444444444444",  # one digit repeated
        "ORD-4111111111111111",
        "4111111111111111.5",
        "41111111111111",  # Visa has no 14-digit numbers
    ],
    "IBAN": [
        "DE89 3704 0044 0532 0130 01",  # check digits do not fit
        "XX89370400440532013000",  # no such country
        "DE8937040044053201300",  # wrong length for DE
        "AB12CDEF34567890",
    ],
    "IP": [
        "version 1.2.3.4",
        "build: 10.2.0.7",
        "1.2.3",
        "10.0.19041.1234",
        "1.3.6.1.4.1",
        "255.255.255.0",
        "0.0.0.0",
        "256.1.1.1",
        "12:30:45",
        "00:1a:2b:3c:4d:5e",
        "std::vector",
        "::1",
        "10:30",
    ],
    "SSN": [
        "000-12-3456",
        "666-12-3456",
        "912-34-5678",
        "123-00-4567",
        "123-45-0000",
        "078-05-1120",
        "219-09-9999",
        "123-45 6789",
        "2024-01-1234",
    ],
    "UK_NINO": ["BG123456A", "GB123456A", "DA123456A", "AB123456E", "AB12 3456C", "XAB123456C"],
    "DE_TAX_ID": ["86095742718", "12345678901", "11111111111", "01234567891"],
    "ES_DNI": ["12345678A", "X1234567A", "123456789Z"],
    "SECRET": [
        "token_count: 12345",
        "api_key: null",
        "secret: ********",
        "password: ${DB_PASSWORD}",
        "the token is expired",
        "key: value",
        "token: abcdefghijklmnopqrstuvwxyz",  # one character class, low variety
        "sk_live_short",
        "ghp_tooShort123",
    ],
}

# Nothing here is personal data or a secret; no detector may fire.
BENIGN = [
    "2024-01-15",
    "2024-01-15T10:30:00Z",
    "2024-01-15 10:30:00.123456",
    "Mon, 15 Jan 2024 10:30:00 GMT",
    "15/01/2024",
    "1700000000",
    "1700000000123",
    "1.2.3",
    "v10.4.12",
    "Python 3.11.4",
    "ORD-2024-001234",
    "LEAD-0137",
    "INV-000123",
    "#12345678",
    "$1,234.56",
    "EUR 1.234.567,89",
    "12,345,678",
    "123e4567-e89b-12d3-a456-426614174000",
    "f47ac10b58cc4372a5670e02b2c3d479",
    "9fceb02d0ae598e95dc970b74767f19372d61af8",
    "9fceb02",
    "Asked for pricing for 3 sites. Also evaluating FlowGrid.",
    "Head of Logistics",
    "Maple Renewables K.K.",
    "deal_value 134300, stage Proposal",
    "page 2 of 15, offset 100, limit 50",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "duration_ms: 1234",
    "3.14159265358979",
    "<EMAIL_1> and <PHONE_23>",
]


def _found(kind: str, text: str) -> list[str]:
    return [item.value for item in DetectorSet([kind]).detect(text)]


@pytest.mark.parametrize(
    ("kind", "value"),
    [(kind, value) for kind, values in TRUE_POSITIVES.items() for value in values],
)
def test_finds_the_whole_value_alone_and_in_text(kind: str, value: str) -> None:
    assert _found(kind, value) == [value]
    assert _found(kind, f"Contact: {value}, thanks.") == [value]
    detected = default_detectors().detect(f"x {value} y")
    assert [(d.kind, d.value) for d in detected] == [(kind, value)]


@pytest.mark.parametrize(("text", "value"), KEYWORD_SECRETS)
def test_secret_after_a_keyword(text: str, value: str | None) -> None:
    found = _found("SECRET", text)
    assert len(found) == 1
    if value is not None:
        assert found == [value]


@pytest.mark.parametrize(
    ("kind", "text"), [(kind, text) for kind, texts in FALSE_POSITIVES.items() for text in texts]
)
def test_look_alikes_are_left_alone(kind: str, text: str) -> None:
    assert _found(kind, text) == []


@pytest.mark.parametrize("text", BENIGN)
def test_benign_values_trigger_no_detector(text: str) -> None:
    assert default_detectors().detect(text) == ()
    assert default_detectors().detect(f"see {text} here") == ()


def test_values_inside_identifiers_are_not_taken_apart() -> None:
    for text in ("id4111111111111111", "ORD-415-555-0142", "x192.168.1.1", "pre_536-22-8790"):
        assert default_detectors().detect(text) == (), text


def test_several_values_in_one_text_keep_their_positions() -> None:
    text = "Mail jordan.blake@acme.example.com, call +1 415 555 0142, IBAN DE89370400440532013000."
    found = default_detectors().detect(text)
    assert [(d.kind, d.value) for d in found] == [
        ("EMAIL", "jordan.blake@acme.example.com"),
        ("PHONE", "+1 415 555 0142"),
        ("IBAN", "DE89370400440532013000"),
    ]
    for item in found:
        assert text[item.start : item.end] == item.value


def test_user_pattern_wins_over_builtins_where_they_overlap() -> None:
    import re

    detectors = DetectorSet(patterns={"EMPLOYEE_ID": re.compile(r"EMP-\d{6}")})
    found = detectors.detect("EMP-415555 and bob@example.com")
    assert [(d.kind, d.value) for d in found] == [
        ("EMPLOYEE_ID", "EMP-415555"),
        ("EMAIL", "bob@example.com"),
    ]
    staff = DetectorSet(["EMAIL"], {"STAFF_MAIL": re.compile(r"\w+@corp\.example\.com")})
    assert [d.kind for d in staff.detect("ann@corp.example.com")] == ["STAFF_MAIL"]


def test_selected_kinds_only_and_groups() -> None:
    only_email = DetectorSet(["EMAIL"])
    assert only_email.kinds == ("EMAIL",)
    assert only_email.detect("+1 415 555 0142 a@example.com")[0].kind == "EMAIL"
    assert len(only_email.detect("+1 415 555 0142 a@example.com")) == 1
    assert DetectorSet(["NATIONAL_ID"]).kinds == ("SSN", "UK_NINO", "DE_TAX_ID", "ES_DNI")
    with pytest.raises(ValueError, match="unknown detector kinds"):
        DetectorSet(["EMAIL", "PASSPORT"])


def test_every_builtin_kind_has_positive_and_negative_cases() -> None:
    assert set(TRUE_POSITIVES) == set(BUILTIN_KINDS) == set(FALSE_POSITIVES)


def test_luhn() -> None:
    assert luhn_valid("79927398713")
    assert not luhn_valid("79927398710")


def test_long_text_is_scanned_kind_by_kind_with_the_same_result() -> None:
    filler = "Asked for pricing for 3 sites on 2026-07-28. " * 10
    text = f"{filler} call +44 20 7946 0958 or 415-555-0142, card 4111 1111 1111 1111. {filler}"
    found = [(d.kind, d.value) for d in DetectorSet().detect(text)]
    assert found == [
        ("PHONE", "+44 20 7946 0958"),
        ("PHONE", "415-555-0142"),
        ("CARD", "4111 1111 1111 1111"),
    ]


def test_user_pattern_value_group() -> None:
    import re

    detectors = DetectorSet([], {"ORDER_REF": re.compile(r"ref: (?P<value>\d{5})")})
    assert [(d.kind, d.value) for d in detectors.detect("see ref: 12345.")] == [
        ("ORDER_REF", "12345")
    ]


def test_hostile_text_stays_linear() -> None:
    import time

    detectors = DetectorSet()
    for text in ("01 " * 20000, "1 " * 20000, "bearer " * 10000, "ab:" * 20000, "a." * 20000):
        started = time.perf_counter()
        detectors.detect(text)
        assert time.perf_counter() - started < 3, text[:12]


@pytest.mark.parametrize(
    ("run", "kind", "value"),
    [
        ("86 095 742 719 020 7946 0958", "PHONE", "020 7946 0958"),  # after a tax id
        ("ref 5555 4111 1111 1111 1111 paid", "CARD", "4111 1111 1111 1111"),  # after a 5555
        ("ids 12 020 7946 0958 done", "PHONE", "020 7946 0958"),
    ],
)
@pytest.mark.parametrize("length", ["short", "long"])
@pytest.mark.parametrize("path", ["whole text", "native", "pure python"])
def test_a_value_inside_a_run_its_pattern_turns_down_is_found(
    run: str, kind: str, value: str, length: str, path: str
) -> None:
    """A match its check turns down is no reason to skip what lies inside it: the search goes
    on from its next character (short text joins every kind in one pattern; long text runs
    them kind by kind, where the longer, turned-down match came first)."""
    filler = "The plan went well and the team shipped on time. " * (60 if length == "long" else 0)
    text = f"{filler}{run} {filler}"
    detectors = DetectorSet()
    if path == "whole text":
        detectors.use_fast_path(False)
    else:
        detectors.use_native_anchors(path == "native")
    found = [(d.kind, d.value) for d in detectors.detect(text)]
    assert (kind, value) in found, found

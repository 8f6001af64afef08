"""The argument digest and the scrubber: no arguments, PII or secrets in clear."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from codemode.audit import AuditEvent, argument_digest, format_time, scrub


def test_digest_is_sha256_of_canonical_json() -> None:
    arguments = {"b": [1, 2], "a": "é"}
    canonical = '{"a":"é","b":[1,2]}'.encode()
    assert argument_digest(arguments) == "sha256:" + hashlib.sha256(canonical).hexdigest()
    # Key order does not matter; values do.
    assert argument_digest({"a": "é", "b": [1, 2]}) == argument_digest(arguments)
    assert argument_digest({"a": "e", "b": [1, 2]}) != argument_digest(arguments)


def test_keyed_digest_differs_per_key() -> None:
    one = argument_digest({"email": "a@b.co"}, key=b"k1")
    assert one.startswith("hmac-sha256:")
    assert one != argument_digest({"email": "a@b.co"}, key=b"k2")
    assert one == argument_digest({"email": "a@b.co"}, key=b"k1")


def test_digest_accepts_values_json_cannot_encode() -> None:
    assert argument_digest({"blob": b"\x00\x01", "nan": float("nan"), "t": (1, 2)}).startswith(
        "sha256:"
    )


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("no such contact jane.doe@example.com", "jane.doe"),
        ("call +1 (555) 010-9999 back", "555"),
        ("phone 0171 1234567 busy", "1234567"),
        ("card 4111 1111 1111 1111 declined", "4111"),
        ("IBAN GB82 WEST 1234 5698 7654 32 unknown", "WEST"),
        ("upstream said token=s3cr3t-value", "s3cr3t"),
        ('{"api_key": "AKIAIOSFODNN7EXAMPLE"}', "AKIAIOSFODNN7EXAMPLE"),
        ("Authorization: Bearer abc.def.ghi123", "abc.def"),
        ("key sk-live-51HxQ2eLkdj3kd93kdK rejected", "51HxQ2"),
        ("connect to 192.168.10.4 failed", "192.168"),
        ("invalid address 'maria.lopez@glo' (truncated)", "maria.lopez"),
        ("no match for maria.lopez@[globex].example.com", "globex"),
        ("no match for +44 20 [7946] 0958", "7946"),
    ],
)
def test_scrub_removes_pii_and_secrets(text: str, gone: str) -> None:
    cleaned = scrub(text)
    assert gone not in cleaned, cleaned
    assert re.search(r"<[A-Z_]+>", cleaned), cleaned


def test_scrub_uses_the_privacy_detectors() -> None:
    """One detector set: the privacy detectors name the kind; the log rules only add."""
    assert scrub("card 4111 1111 1111 1111") == "card <CARD>"
    assert scrub("mail maria.lopez@[globex].example.com") == "mail <EMAIL>"
    assert scrub("call +44 20 7946 0958") == "call <PHONE>"


def test_scrub_keeps_what_helps() -> None:
    text = "crm.delete_contact matches policy.rules[0] (action 'deny'); HTTP 404 after 30.5 s"
    assert scrub(text) == text
    assert scrub("no contact <EMAIL_1>") == "no contact <EMAIL_1>"


def test_scrub_is_short_and_single_line() -> None:
    cleaned = scrub("line one\nline two " + "word " * 500)
    assert "\n" not in cleaned
    assert len(cleaned) <= 240


def test_event_to_dict_is_json_with_an_iso_time() -> None:
    event = AuditEvent(0.5, "s1", "crm", "t", "sha256:00", "allow", 1.0, "ok")
    data = event.to_dict()
    assert data["time"] == "1970-01-01T00:00:00.500Z"
    assert json.loads(json.dumps(data)) == data
    assert format_time(86400.0) == "1970-01-02T00:00:00.000Z"

"""The fast path hides everything the whole-text scan hides (a property over generated text),
and long text seen before is answered from the content-hash cache."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.privacy.detectors import Detection, DetectorSet
from codemode.privacy.fastscan import FAST_MIN_CHARS

# Values of every kind, their look-alikes, and the pieces text is made of around them.
VALUES = [
    "jordan.blake@acme.example.com", "a.b+tag@sub.example.org", "X_Y-Z%1@mail-1.example.co.uk",
    "+1 415 555 0142", "+44 (0)20 7946 0958", "+4915112345678", "(415) 555-0142",
    "415.555.0142", "1-800-555-0199", "020 7946 0958", "07700 900123", "030/1234567",
    "(030) 1234567", "01 55 50 12 34", "0044 20 7946 0958", "4111 1111 1111 1111",
    "4012888888881881", "3782 822463 10005", "DE89 3704 0044 0532 0130 00",
    "GB82WEST12345698765432", "FR14 2004 1010 0505 0001 3M02 606", "NL91ABNA0417164300",
    "192.168.1.10", "8.8.8.8", "2001:db8::8a2e:370:7334", "fe80::1ff:fe23:4567:890a",
    "536-22-8790", "536 22 8790", "AB123456C", "JG 10 37 59 A", "86 095 742 719",
    "65823451092", "87654321X", "12345678-Z", "X1234567L", "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "rk_live_51H8xYzAbCdEfGhIjKlMnOp", "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "xoxb-1234567890-abcdefghij",
    "AKIAIOSFODNN7EXAMPLE", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345", "client_secret=c0ffee1234DEADbeef5678",
    "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "Authorization: Bearer eyAbc123DEF456ghi789JKL", "password: hunter22",
    "token=9f8e7d6c5b4a39281706f5e4d3c2b1a0", "2024-01-15", "01-02-2024 12:30",
    "ORD-2024-001234", "1700000000123", "v1.2.3", "10.0.19041.1234", "12:30:45",
    "00:1a:2b:3c:4d:5e", "std::vector", "4111 1111 1111 1112", "255.255.255.0",
]  # fmt: skip
WORDS = ["the", "order", "of", "and", "Status", "ID", "key", "auth", "pass", "é", "٣", "—"]
SEPARATORS = [" ", "  ", "\n", ", ", ": ", "=", "-", ".", "/", "(", ")", "+", "@", "_", ""]

piece = st.one_of(
    st.sampled_from(VALUES),
    st.sampled_from(WORDS),
    st.integers(0, 10**12).map(str),
    st.text(alphabet="0123456789 .-/()+:@ABCXYZabc_", min_size=1, max_size=12),
)
texts = st.lists(st.tuples(piece, st.sampled_from(SEPARATORS)), min_size=1, max_size=60).map(
    lambda parts: "".join(a + b for a, b in parts)
)


def covered(found: tuple[Detection, ...]) -> set[int]:
    return {index for item in found for index in range(item.start, item.end)}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_the_fast_path_hides_everything_the_whole_text_scan_hides(text: str) -> None:
    detectors = DetectorSet()
    detectors._fast_min = 0  # the fast path for every length, not only long text
    old = detectors.reference_plain(text)
    new = detectors.plain(text)
    missing = covered(old) - covered(new)
    assert not missing, (text, old, new)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(texts, min_size=40, max_size=80).map(" ".join))
def test_the_same_holds_for_long_text(text: str) -> None:
    detectors = DetectorSet()
    old = detectors.reference_plain(text)
    new = detectors.plain(text)
    assert len(text) < FAST_MIN_CHARS or not covered(old) - covered(new)


def test_long_text_takes_the_fast_path_and_finds_the_same_values() -> None:
    text = ("Contact jordan.blake@acme.example.com or +44 20 7946 0958. " * 40) + (
        "card 4111 1111 1111 1111, IBAN DE89 3704 0044 0532 0130 00, AB123456C. " * 20
    )
    detectors = DetectorSet()
    assert len(text) >= FAST_MIN_CHARS
    fast = detectors.plain(text)
    assert {d.kind for d in fast} == {"EMAIL", "PHONE", "CARD", "IBAN", "UK_NINO"}
    assert fast == detectors.reference_plain(text)


def test_long_text_seen_before_is_not_scanned_again() -> None:
    text = "mail jordan.blake@acme.example.com now. " * 200
    detectors = DetectorSet()
    calls: list[str] = []
    scan = detectors._detect

    def counting(value: str) -> tuple[Detection, ...]:
        calls.append(value)
        return scan(value)

    detectors._detect = counting  # type: ignore[method-assign]
    first = detectors.detect(text)
    assert detectors.detect(text) == first
    assert len(calls) == 1
    detectors.clear_cache()
    detectors.detect(text)
    assert len(calls) == 2

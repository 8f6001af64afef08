"""The fast path hides everything the whole-text scan hides (a property over generated text),
and long text seen before is answered from the content-hash cache."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.privacy import fastscan
from codemode.privacy.detectors import Detection, DetectorSet
from codemode.privacy.fastscan import FAST_MIN_CHARS, native_available
from codemode.privacy.markup import _markup_positions, markup_detections
from codemode.privacy.native import native_scanner

# Values of every kind, their look-alikes, and the pieces text is made of around them.
VALUES = [
    "jordan.blake@acme.example.com", "a.b+tag@sub.example.org", "X_Y-Z%1@mail-1.example.co.uk",
    "+1 415 555 0142", "+44 (0)20 7946 0958", "+4915112345678", "(415) 555-0142",
    "415.555.0142", "1-800-555-0199", "020 7946 0958", "07700 900123", "030/1234567",
    "(030) 1234567", "01 55 50 12 34", "0044 20 7946 0958", "4111 1111 1111 1111",
    "4012888888881881", "3782 822463 10005", "DE89 3704 0044 0532 0130 00",
    "GB82WEST12345698765432", "FR14 2004 1010 0505 0001 3M02 606", "NL91ABNA0417164300",
    "192.168.1.10", "8.8.8.8", "2001:db8::8a2e:370:7334", "fe80::1ff:fe23:4567:890a",
    "2001:0db8:85a3:0000:0000:8a2e:0370:7334", "64:ff9b:1:2:3:4:10.0.0.1",
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
WORDS = ["the", "order", "of", "and", "Status", "ID", "key", "auth", "pass", "é", "٣", "—",
         "\u017fecret", "\u00b2", "\u00a0"]  # fmt: skip
SEPARATORS = [" ", "  ", "\n", ", ", ": ", "=", "-", ".", "/", "(", ")", "+", "@", "_", "",
              "\u2009", "\u3000"]  # fmt: skip
MARKUP = ["[", "]", "**", "__", "<em>", "</em>", "...", "…", " @ ", "\t", "\n\n", "  ", "\u00a0",
          "<", ">", "<b class='x'>", "</SPAN\t>", "<\u017ftrong>", "<\u0131>", "<mar\u212a>", "< em>",
          "<emph>", "<hl\u00a0x>", "<i\x1cid=1>", "\n \n", "\r\n", "\x1c"]  # fmt: skip

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


def detector_set(native: bool) -> DetectorSet:
    """Detectors whose fast path finds its anchors natively (Hyperscan) or in pure Python."""
    assert native_available(), "the dev extra installs hyperscan: both paths are tested"
    detectors = DetectorSet()
    detectors.use_native_anchors(native)
    return detectors


@pytest.mark.parametrize("native", [True, False], ids=["native", "pure-python"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_the_fast_path_hides_everything_the_whole_text_scan_hides(native: bool, text: str) -> None:
    detectors = detector_set(native)
    detectors._fast_min = 0  # the fast path for every length, not only long text
    old = detectors.reference_plain(text)
    new = detectors.plain(text)
    missing = covered(old) - covered(new)
    assert not missing, (text, old, new)


@pytest.mark.parametrize("native", [True, False], ids=["native", "pure-python"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(texts, min_size=40, max_size=80).map(" ".join))
def test_the_same_holds_for_long_text(native: bool, text: str) -> None:
    detectors = detector_set(native)
    old = detectors.reference_plain(text)
    new = detectors.plain(text)
    assert len(text) < FAST_MIN_CHARS or not covered(old) - covered(new)


@pytest.mark.parametrize("native", [True, False], ids=["native", "pure-python"])
@pytest.mark.parametrize("value", VALUES)
def test_each_value_alone_is_found_by_the_fast_path(native: bool, value: str) -> None:
    detectors = detector_set(native)
    detectors._fast_min = 0
    for text in (value, f"see {value} now", f"({value}),\n{value}."):
        old = detectors.reference_plain(text)
        assert not covered(old) - covered(detectors.plain(text)), (text, old)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.one_of(piece, st.sampled_from(MARKUP), st.sampled_from(SEPARATORS)), max_size=80)
)
def test_markup_found_natively_is_the_markup_the_text_search_finds(parts: list[str]) -> None:
    text = "".join(parts)
    detectors = detector_set(native=True)
    scanner = native_scanner()
    assert scanner is not None
    candidates = scanner.markup_candidates(scanner.hits(fastscan._Text(text).raw))
    assert _markup_positions(text, candidates) == _markup_positions(text)
    searched = markup_detections(text, detectors.reference_plain)
    assert markup_detections(text, detectors.reference_plain, candidates) == searched


@pytest.mark.parametrize("markup", MARKUP)
@pytest.mark.parametrize("around", ["{}", "see {} now", "12{}34", "ab 7{}\u00b2 x{}y"])
def test_each_piece_of_markup_is_found_natively(markup: str, around: str) -> None:
    """Every piece of ``MARKUP``, alone and between digits (the generated texts above hold
    the rarer ones seldom)."""
    text = around.format(markup, markup)
    scanner = native_scanner()
    assert scanner is not None
    candidates = scanner.markup_candidates(scanner.hits(fastscan._Text(text).raw))
    assert _markup_positions(text, candidates) == _markup_positions(text)


def test_native_anchors_are_used_and_find_what_the_pure_python_ones_find() -> None:
    text = ("Order 4417 shipped on 2024-05-02; total 1,240.50 EUR. " * 40) + (
        "Mail ops@example.com, +49 30 1234567, card 4111 1111 1111 1111, 10.0.0.1, "
        "2001:db8::8a2e:370:7334, AB123456C, DE89 3704 0044 0532 0130 00, token=9f8e7d6c5b4a3928.\n"
    ) * 10
    native, pure = detector_set(native=True), detector_set(native=False)
    assert native._window_min < pure._window_min  # the native anchors are in use
    found = native.detect(text)
    assert found == pure.detect(text)
    kinds = {"EMAIL", "PHONE", "CARD", "IP", "UK_NINO", "IBAN", "SECRET"}
    assert {item.kind for item in found} == kinds


@pytest.mark.parametrize("native", [True, False], ids=["native", "pure-python"])
def test_long_text_takes_the_fast_path_and_finds_the_same_values(native: bool) -> None:
    text = ("Contact jordan.blake@acme.example.com or +44 20 7946 0958. " * 40) + (
        "card 4111 1111 1111 1111, IBAN DE89 3704 0044 0532 0130 00, AB123456C. " * 20
    )
    detectors = detector_set(native)
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

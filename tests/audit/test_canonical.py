"""The argument digest writes long strings with pydantic-core: the same digest as json.dumps."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
from typing import Any

import pytest

from codemode.audit.canonical import LONG_CHARS
from codemode.audit.events import argument_digest


def _fallback(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return {"$bytes": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


def reference(arguments: Any, key: bytes | None = None) -> str:
    """The digest as it was defined: the whole canonical JSON from json.dumps."""
    data = json.dumps(
        arguments,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=True,
        default=_fallback,
    ).encode()
    if key is not None:
        return "hmac-sha256:" + hmac.new(key, data, hashlib.sha256).hexdigest()
    return "sha256:" + hashlib.sha256(data).hexdigest()


def every_code_point() -> str:
    """Every code point UTF-8 can encode (no surrogates), quotes and backslashes among them."""
    return "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


def test_a_long_string_of_every_code_point_digests_as_json_dumps_wrote_it() -> None:
    text = every_code_point()
    assert len(text) >= LONG_CHARS
    assert argument_digest({"text": text}) == reference({"text": text})
    key = b"k" * 32
    assert argument_digest({"text": text}, key=key) == reference({"text": text}, key)


def test_long_strings_among_other_values_in_any_key_order() -> None:
    long = ('Order 4417 shipped; "quoted" \\ back\tslash\n ops@example.com ' * 2000)[:LONG_CHARS]
    arguments: dict[Any, Any] = {
        "zeta": long + "z",
        "alpha": long + "a",
        "middle": {"nested": long, "n": [1, 2.5, None, True]},
        "numbers": [math.inf, -0.0, 1e300, 10**30],
        "raw": b"\x00\x01bytes",
        "tags": ("t1", "t2"),
        "short": "é ü \u2028",
        "exactly": "x" * LONG_CHARS,
        "one_less": "y" * (LONG_CHARS - 1),
    }
    assert argument_digest(arguments) == reference(arguments)
    assert argument_digest(arguments, key=b"s") == reference(arguments, b"s")


def test_text_shaped_like_a_marker_is_text_like_any_other() -> None:
    # Each call's markers hold a new random nonce: an argument cannot hold them.
    shaped = "\x00codemode-0123456789abcdef-0\x00"
    arguments = {
        "a": shaped + "p" * LONG_CHARS,
        "b": shaped,
        "c": {"d": '"\\u0000codemode-0123456789abcdef-1\\u0000"'},
    }
    assert argument_digest(arguments) == reference(arguments)


def test_different_long_texts_give_different_digests() -> None:
    first, second = "a" * LONG_CHARS, "a" * (LONG_CHARS - 1) + "b"
    assert argument_digest({"t": first}) != argument_digest({"t": second})
    assert argument_digest({"t": first, "u": second}) != argument_digest({"t": second, "u": first})


@pytest.mark.parametrize("length", [10, LONG_CHARS])
def test_a_lone_surrogate_has_a_digest_where_encoding_raised_before(length: int) -> None:
    text = "x" * length + "\ud800"
    with pytest.raises(UnicodeEncodeError):
        reference({"t": text})
    digest = argument_digest({"t": text})
    assert digest.startswith("sha256:")
    assert digest != argument_digest({"t": "x" * length + "\udc00"})

"""The canonical JSON of a call's arguments, as pieces of bytes to hash one after the other.

Canonical: ``json.dumps`` with sorted keys, no spaces, UTF-8 (``ensure_ascii=False``). Its C
encoder writes a MB of text in about 2.7 ms while holding the GIL, which the guards reading
the same call need; pydantic-core's writes the same bytes for any string in 0.4 ms (checked
for every code point by ``tests/audit/test_canonical.py``). So a long string at the top
level of the arguments (a document to store, a page to echo) is encoded by pydantic-core and
the rest by ``json.dumps``, with a marker in its place that no argument can hold (a random
nonce, new for each call), and the pieces are hashed in order: the digest is the one the whole
``json.dumps`` would give.

Text that UTF-8 cannot encode (a lone surrogate, which Python strings may hold) is encoded
with ``surrogatepass``: its digest is still defined, where ``str.encode`` would raise.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pydantic_core

__all__ = ["LONG_CHARS", "canonical_pieces"]

#: Strings at the top level from this length on are encoded by pydantic-core.
LONG_CHARS = 1 << 16


def canonical_pieces(arguments: Any, fallback: Callable[[Any], Any]) -> Iterator[bytes]:
    """The canonical JSON of ``arguments`` in pieces (``fallback``: ``json.dumps``'s
    ``default``, for values JSON has no form for)."""
    long: list[str] = []
    nonce = secrets.token_hex(8)
    if isinstance(arguments, dict):
        swapped: dict[Any, Any] = {}
        for key, value in arguments.items():
            if isinstance(value, str) and len(value) >= LONG_CHARS:
                swapped[key] = f"\x00codemode-{nonce}-{len(long)}\x00"
                long.append(value)
            else:
                swapped[key] = value
        arguments = swapped
    text = _dumps(arguments, fallback)
    if not long:
        yield _utf8(text)
        return
    # json.dumps writes each marker's NUL as \u0000; keys are sorted, so the markers come in
    # the order of their keys, not of ``long``. Found as plain text: a pattern made with
    # each call's nonce would be compiled anew every time (and crowd out ``re``'s cache).
    marks = [f'"\\u0000codemode-{nonce}-{index}\\u0000"' for index in range(len(long))]
    placed = sorted((text.index(mark), index) for index, mark in enumerate(marks))
    done = 0
    for at, index in placed:
        yield _utf8(text[done:at])
        yield _string(long[index])
        done = at + len(marks[index])
    yield _utf8(text[done:])


def _dumps(value: Any, fallback: Callable[[Any], Any]) -> str:
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=True,
        default=fallback,
    )


def _string(value: str) -> bytes:
    try:
        return pydantic_core.to_json(value)
    except pydantic_core.PydanticSerializationError:  # a lone surrogate
        return _utf8(json.dumps(value, ensure_ascii=False))


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")

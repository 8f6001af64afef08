"""``assert_no_pii``: check that text meant for the model holds no personal data or secrets.

For tests (the gateway's end-to-end tests run it over whole MCP responses). Text that parses as
JSON is also checked string by string, so escapes such as ``\\n`` cannot hide a value.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Sequence
from typing import Any

from codemode.privacy.detectors import BUILTIN_KINDS, Detection, DetectorSet

__all__ = ["assert_no_pii", "find_pii"]


def find_pii(text: str, *, kinds: Sequence[str] = BUILTIN_KINDS) -> list[Detection]:
    """Every detection in ``text`` and, if it is JSON, in each string inside it."""
    detectors = _detectors(tuple(kinds))
    found = list(detectors.detect(text))
    try:
        data = json.loads(text)
    except ValueError:
        return found
    seen = {item.value for item in found}
    for string in _strings(data):
        for item in detectors.detect(string):
            if item.value not in seen:
                seen.add(item.value)
                found.append(item)
    return found


@functools.lru_cache(maxsize=8)
def _detectors(kinds: tuple[str, ...]) -> DetectorSet:
    return DetectorSet(kinds)


def _strings(data: Any) -> Iterator[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield str(key)
            yield from _strings(value)
    elif isinstance(data, list):
        for item in data:
            yield from _strings(item)


def assert_no_pii(
    text: str, *, kinds: Sequence[str] = BUILTIN_KINDS, allow: Sequence[str] = ()
) -> None:
    """Raise ``AssertionError`` naming each value found (values in ``allow`` are accepted)."""
    found = [item for item in find_pii(text, kinds=kinds) if item.value not in allow]
    if found:
        listed = "; ".join(f"{item.kind} {item.value!r}" for item in found[:20])
        more = f" and {len(found) - 20} more" if len(found) > 20 else ""
        raise AssertionError(f"PII in text meant for the model: {listed}{more}")

"""A large call's argument digest, worked out while the call runs.

The audit row of every call carries ``argument_digest`` of its arguments: canonical JSON, then
SHA-256. For a megabyte of text that is about 3 ms (the JSON encoding most of it), and it was
worked out after the call returned, adding to the call's time. A call with that much text
mostly waits on its server, so the digest of a large argument is worked out on a thread of its
own meanwhile. Small arguments are digested after the call as before: a thread hand-off costs
more than their digest. Nothing changes the arguments while the call runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from codemode.audit.events import argument_digest

__all__ = ["EARLY_CHARS", "digest_during_call"]

#: Arguments holding at least this much text at their top level are digested during the call.
EARLY_CHARS = 1 << 18

# Its threads start on the first large argument.
_DIGESTS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="codemode-audit-digest")


def digest_during_call(arguments: Any, *, key: bytes | None) -> Callable[[], str]:
    """The digest of ``arguments``, to ask for once the call returned: already under way
    when they hold much text."""
    if _text_chars(arguments) < EARLY_CHARS:
        return lambda: argument_digest(arguments, key=key)
    return _DIGESTS.submit(argument_digest, arguments, key=key).result


def _text_chars(arguments: Any) -> int:
    if not isinstance(arguments, Mapping):
        return 0
    return sum(len(value) for value in arguments.values() if isinstance(value, str | bytes))

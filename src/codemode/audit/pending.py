"""A large call's argument digest, worked out while the call waits for its server.

The audit row of every call carries ``argument_digest`` of its arguments: canonical JSON, then
SHA-256. For a megabyte of text that is about 1 ms (2.5 ms while ``json.dumps`` wrote all of
it: ``canonical.py`` writes long strings now), and it was worked out after the call returned,
adding to the call's time. So the digest of a large argument is worked out on a thread of its
own, from the moment the call is out (``codemode.bridge.waiting``): not before, where its JSON
encoding would hold the GIL the guards need to read the same megabyte (on the 1 MB echo their
check took 12.2 ms instead of 10.2, two gateways side by side, calls interleaved). A call
refused before it went out is digested on the caller's thread, as small arguments are: a
thread hand-off costs more than their digest. Nothing changes the arguments meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from codemode.audit.events import argument_digest
from codemode.bridge.waiting import defer_until_waiting
from codemode.cpus import take_process_cpus

__all__ = ["EARLY_CHARS", "digest_during_call"]

#: Arguments holding at least this much text at their top level are digested during the call.
EARLY_CHARS = 1 << 18

# Its threads start on the first large argument.
_DIGESTS = ThreadPoolExecutor(
    max_workers=2, thread_name_prefix="codemode-audit-digest", initializer=take_process_cpus
)


class _Digest:
    """One large argument's digest: started when the call is out, or worked out when asked."""

    def __init__(self, arguments: Any, key: bytes | None) -> None:
        self._arguments, self._key = arguments, key
        self._future: Future[str] | None = None
        self._lock = threading.Lock()
        self._withdraw = defer_until_waiting(self.start)

    def start(self) -> None:
        with self._lock:
            if self._future is None:
                # Raises at interpreter exit (the pool is shut down): ``result`` digests here.
                self._future = _DIGESTS.submit(argument_digest, self._arguments, key=self._key)

    def result(self) -> str:
        """The digest; asked once, when the call is over."""
        self._withdraw()
        with self._lock:
            future = self._future
        try:
            if future is None:
                return argument_digest(self._arguments, key=self._key)
            return future.result()
        finally:
            # ``_withdraw`` holds ``start``, so ``self``: a cycle that kept the arguments (a
            # megabyte each) until a collection found it, after the session let them go.
            self._arguments, self._withdraw = None, _nothing


def _nothing() -> None:
    return None


def digest_during_call(arguments: Any, *, key: bytes | None) -> Callable[[], str]:
    """The digest of ``arguments``, to ask for once the call returned: under way from the
    moment the call is out when they hold much text."""
    if _text_chars(arguments) < EARLY_CHARS:
        return lambda: argument_digest(arguments, key=key)
    return _Digest(arguments, key).result


def _text_chars(arguments: Any) -> int:
    if not isinstance(arguments, Mapping):
        return 0
    return sum(len(value) for value in arguments.values() if isinstance(value, str | bytes))

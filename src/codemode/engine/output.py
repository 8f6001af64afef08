"""Output as the code writes it: the callback front ends pass to ``Codemode.execute``.

``on_output(stream, data)`` is called with ``"stdout"`` or ``"stderr"`` and the bytes just
written, from the execution's worker thread, before the execution ends. When the session has a
privacy net, streamed output passes through it too: ``ScannedOutput`` cuts the stream at line
ends and scans each line, so a value is never split across two scans.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from codemode.sandbox.runner import OutputCallback

__all__ = ["OutputCallback", "ScannedOutput"]

log = logging.getLogger(__name__)

# A line that never ends is scanned in pieces of this size, so memory stays bounded.
_MAX_PENDING = 64 * 1024


class ScannedOutput:
    """Wraps an ``OutputCallback``: complete lines go through ``scan`` before they are passed on.

    Call ``flush()`` when the execution ends, for a last line with no newline. A target that
    fails is dropped (logged once); the execution goes on.
    """

    def __init__(self, target: OutputCallback, scan: Callable[[str], str]) -> None:
        self._target = target
        self._scan = scan
        self._pending: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self._broken = False

    def __call__(self, stream: str, data: bytes) -> None:
        pending = self._pending.setdefault(stream, bytearray())
        pending += data
        end = pending.rfind(b"\n") + 1
        if end == 0 and len(pending) >= _MAX_PENDING:
            end = len(pending)
        if end:
            self._pass_on(stream, bytes(pending[:end]))
            del pending[:end]

    def flush(self) -> None:
        for stream, pending in self._pending.items():
            if pending:
                self._pass_on(stream, bytes(pending))
                pending.clear()

    def _pass_on(self, stream: str, data: bytes) -> None:
        if self._broken:
            return
        text = data.decode("utf-8", "replace")
        try:
            self._target(stream, self._scan(text).encode("utf-8"))
        except Exception:
            log.exception("the output callback failed; output is no longer passed on")
            self._broken = True

"""Give the C heap's free pages back to the system once a burst of allocations is over.

glibc's malloc keeps freed memory in its arenas for reuse: after the search index is built, or
idle sessions let go of large results, the pages their objects held stay counted in the
gateway's private memory (8 MiB after a small index build, 14 MiB after a dozen 1 MB
results) although nothing uses them. ``malloc_trim`` returns the free pages of every arena;
elsewhere (musl, other platforms) this does nothing.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

__all__ = ["trim_heap"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        function: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return function


def trim_heap() -> bool:
    """Return free heap pages to the system; False where the C library cannot."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True

"""Give the C heap's free pages back to the system once a burst of allocations is over.

glibc's malloc keeps freed memory in its arenas for reuse: after the search index is built, or
idle sessions let go of large results, the pages their objects held stay counted in the
gateway's private memory (8 MiB after a small index build, 14 MiB after a dozen 1 MB
results) although nothing uses them. ``malloc_trim`` returns the free pages of every arena;
elsewhere (musl, other platforms) this does nothing.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
from collections.abc import Callable, Iterator

__all__ = [
    "collect_and_trim",
    "collection_paused",
    "freeze_startup_objects",
    "heap_blocks_up_to",
    "keep_large_blocks_in_heap",
    "limit_arenas",
    "paused_for",
    "release_on_trim",
    "space_out_full_collections",
    "trim_heap",
]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
# The gateway's threads (event loop, sandbox starters, workers) share this many arenas.
GATEWAY_ARENAS = 2
#: Blocks below this size come from the heap (``keep_large_blocks_in_heap``): glibc's
#: largest (``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit systems).
HEAP_BLOCKS_UP_TO = 32 << 20
#: Free memory at the top of the heap kept for the next large value before it goes back
#: (twice the largest block, as glibc's own adjustment keeps).
HEAP_TOP_KEPT = 64 << 20


@functools.cache
def _libc_function(name: str) -> Callable[..., int] | None:
    """A function of the C library, or None where it has none (``ctypes`` loads on the first
    call: the privacy scan uses this module, and config loads the privacy settings)."""
    import ctypes

    try:
        function: Callable[..., int] = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    return function


def _malloc_trim() -> Callable[[int], int] | None:
    return _libc_function("malloc_trim")


#: What keeps memory for speed while the gateway is busy (``release_on_trim``).
_releases: list[Callable[[], None]] = []


def release_on_trim(release: Callable[[], None]) -> None:
    """Have ``trim_heap`` call ``release`` first: a cache that keeps memory for the next
    call while the gateway is busy (a large frame's buffer) lets go of it when it trims."""
    if release not in _releases:
        _releases.append(release)


def trim_heap() -> bool:
    """Return free heap pages to the system (after what ``release_on_trim`` registered let go
    of what it kept); False where the C library cannot."""
    for release in _releases:
        release()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def collect_and_trim() -> bool:
    """``trim_heap`` after a collection: what idle sessions left in reference cycles (a
    closed client's protocol objects, a buffer some cycle still reaches) is freed first.
    With start-up objects frozen (``freeze_startup_objects``) a collection walks only what
    serving made: 1 to 2 ms in a gateway after its sessions were released."""
    gc.collect()
    return trim_heap()


def freeze_startup_objects() -> int:
    """Collect once, then keep what survived (modules, the catalog, the search index) out of
    every later collection: a full collection then walks only what serving made, not the
    hundreds of thousands of objects start-up left (36 to 55 ms each, every dozen large calls,
    before). Returns how many objects were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


#: Collections of the two younger generations between two of every object, in a gateway
#: (``space_out_full_collections``; Python's own is 10).
FULL_COLLECTION_EVERY = 100


def space_out_full_collections(every: int = FULL_COLLECTION_EVERY) -> tuple[int, int, int]:
    """Collect every object (the oldest generation) at most once per ``every`` collections of
    the middle one, instead of once per 10; returns the thresholds before, to restore.

    A gateway's old objects are mostly values it keeps for a session (a vault of tokenized
    records grows by 10,000 values a 5,000-record result, and each value is an object the
    collector walks), and Python collects the oldest generation whenever it grew by a quarter
    since the last time: on a session reading pages of records, a full walk of the session's
    values every call or two, 46 ms a call on average (``benchmarks/peers.py``'s P6c), a sixth
    of the gateway's CPU. Cyclic garbage that lived long enough to grow old waits that much
    longer to be freed (an idle gateway collects everything: ``collect_and_trim``); the young
    generations are collected as often as before."""
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], every)
    return before


def limit_arenas(arenas: int = GATEWAY_ARENAS) -> bool:
    """Cap glibc's malloc arenas (by default one per thread, up to 8 per core): each thread
    that ever allocated keeps an arena whose free pages count as the process's own. The
    gateway's threads mostly wait on the GIL, so they lose nothing by sharing. False where
    the C library cannot."""
    mallopt = _libc_function("mallopt")
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, arenas))


def keep_large_blocks_in_heap(up_to: int = HEAP_BLOCKS_UP_TO, kept: int = HEAP_TOP_KEPT) -> bool:
    """Serve blocks up to ``up_to`` bytes from the heap and keep up to ``kept`` bytes free at
    its top, so that the copies a large value goes through (a MiB result parsed, scanned,
    tokenized, framed) reuse memory instead of each asking the system for fresh pages.

    glibc maps a block of 128 KiB or more on its own and unmaps it when freed (the threshold
    rises after such frees, but with every pattern of sizes differently), so each copy of a
    1 MB value cost 256 page faults: about 1,260 per call on the 1 MB echo of
    ``benchmarks/peers.py`` (P6), 4.2 ms of system time in a 27 ms call; with these settings
    64 faults and 1.0 ms, and the call 9% faster (two gateways, calls interleaved). Setting
    a threshold also ends glibc's own adjustment, so blocks above it are mapped fresh every
    time: with 4 MiB here, a 10 MB value from a tool to the code and on to another tool
    (``benchmarks/sandbox.py`` W3) took 27-32 ms where glibc left alone took 15-21, and
    15-18 ms with 32 MiB. The memory kept is bounded by ``kept`` per arena (glibc's own
    adjustment keeps as much), and ``trim_heap`` (an idle gateway) returns it. False where
    the C library cannot."""
    mallopt = _libc_function("mallopt")
    kept_so = (
        mallopt is not None
        and bool(mallopt(_M_MMAP_THRESHOLD, up_to))
        and bool(mallopt(_M_TRIM_THRESHOLD, kept))
    )
    _kept.blocks_up_to = up_to if kept_so else 0
    return kept_so


class _Kept:
    """What ``keep_large_blocks_in_heap`` set in this process."""

    blocks_up_to = 0


_kept = _Kept()


def heap_blocks_up_to() -> int:
    """The size up to which blocks come from the heap (``keep_large_blocks_in_heap``); 0
    where this process left malloc as it was (each block of 128 KiB or more mapped fresh)."""
    return _kept.blocks_up_to


class _Pauses:
    """The open ``collection_paused`` blocks, in every thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open = 0
        self.resume = False  # whether the collector was on when the first of them opened


_pauses = _Pauses()


#: ``paused_for`` pauses the collector from this many new objects on.
PAUSE_FROM_OBJECTS = 256


def paused_for(objects: int) -> contextlib.AbstractContextManager[None]:
    """``collection_paused`` where a block makes ``objects`` objects or more (an index of a
    result's thousands of new values), else nothing: a few are not worth the lock."""
    return collection_paused() if objects >= PAUSE_FROM_OBJECTS else contextlib.nullcontext()


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector from running while the block allocates.

    Scanning dense text makes tens of thousands of small objects (matches, findings,
    detections) that form no cycles and that reference counting frees; each allocation
    counts toward the next collection, and each collection walks every tracked object the
    process holds: a third of the scan's time on a MiB of contact lines. Blocks may nest and
    run in several threads at once: the collector runs again when the last closes (if it ran
    when the first opened). Cyclic garbage made meanwhile waits for the next collection."""
    with _pauses.lock:
        if _pauses.open == 0:
            _pauses.resume = gc.isenabled()
            gc.disable()
        _pauses.open += 1
    try:
        yield
    finally:
        with _pauses.lock:
            _pauses.open -= 1
            if _pauses.open == 0 and _pauses.resume:
                gc.enable()

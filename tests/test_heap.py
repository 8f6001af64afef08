"""The gateway keeps what start-up made out of later garbage collections."""

from __future__ import annotations

import gc

from codemode.heap import freeze_startup_objects, limit_arenas


def test_objects_alive_after_start_up_are_kept_out_of_later_collections() -> None:
    kept = [[index] for index in range(1000)]
    try:
        frozen = freeze_startup_objects()
        assert frozen >= len(kept)
        walked = {id(item) for generation in range(3) for item in gc.get_objects(generation)}
        assert not any(id(item) in walked for item in kept)
        made_later = [0]
        assert any(item is made_later for item in gc.get_objects(0))
    finally:
        gc.unfreeze()


def test_the_malloc_arenas_can_be_capped() -> None:
    # glibc (every Linux this runs on in CI) takes the cap; elsewhere the call says it could not.
    assert limit_arenas(8) is True


def test_a_collection_before_the_trim_frees_what_only_cycles_held() -> None:
    import weakref

    from codemode.heap import collect_and_trim

    class Node:
        other: object = None

    first, second = Node(), Node()
    first.other, second.other = second, first
    watched = weakref.ref(first)
    del first, second
    gc.disable()
    try:
        assert watched() is not None  # only a collection finds the cycle
        assert collect_and_trim() is True
        assert watched() is None
    finally:
        gc.enable()


GROWING_VALUES = """
import resource, sys
from codemode.heap import keep_large_blocks_in_heap
if sys.argv[1] == "kept":
    assert keep_large_blocks_in_heap()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for step in range(30):  # values of 1 to 4 MiB, each copied once, as a large result is
    data = b"x" * ((1 << 20) + step * 100_000)
    copy = data + b"y"
    del data, copy
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_large_values_reuse_the_heap_instead_of_fresh_pages() -> None:
    import subprocess
    import sys

    # In processes of their own: the setting is the process's for good.
    faults = {
        way: int(
            subprocess.run(
                [sys.executable, "-c", GROWING_VALUES, way],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for way in ("default", "kept")
    }
    # 30 values of 1 to 4 MiB, twice: about 37,000 pages faulted in by default (each block
    # mapped afresh), under 2,000 once they come from the heap (it grows to the largest).
    assert faults["kept"] * 5 < faults["default"], faults

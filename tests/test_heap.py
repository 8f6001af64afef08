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

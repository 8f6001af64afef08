"""The gateway keeps what start-up made out of later garbage collections."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable

from codemode.heap import collection_paused, freeze_startup_objects, limit_arenas
from tests.conftest import Program


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


# Page faults of values made and copied, in a process of its own (the setting is the
# process's for good): ``kept`` with the gateway's setting, ``4 MiB`` with blocks of up to 4 MiB
# kept (a threshold under 10 MB values: glibc's own adjustment ended), else malloc as it is.
FAULTS_OF_VALUES = """
import resource, sys
from codemode.heap import keep_large_blocks_in_heap
way, sizes = sys.argv[1], [int(size) for size in sys.argv[2:]]
if way == "kept":
    assert keep_large_blocks_in_heap()
elif way == "4 MiB":
    assert keep_large_blocks_in_heap(4 << 20, 16 << 20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for size in sizes:  # each value copied once, as a large result is
    data = b"x" * size
    copy = data + b"y"
    del data, copy
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(way: str, sizes: list[int]) -> int:
    import subprocess
    import sys

    argv = [sys.executable, "-c", FAULTS_OF_VALUES, way, *map(str, sizes)]
    return int(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)


def test_large_values_reuse_the_heap_instead_of_fresh_pages() -> None:
    sizes = [(1 << 20) + step * 100_000 for step in range(30)]  # 1 to 4 MiB
    faults = {way: _faults(way, sizes) for way in ("default", "kept")}
    # 30 values of 1 to 4 MiB, twice: about 37,000 pages faulted in by default (each block
    # mapped afresh), under 2,000 once they come from the heap (it grows to the largest).
    assert faults["kept"] * 5 < faults["default"], faults


def test_values_of_ten_mb_reuse_the_heap_too() -> None:
    sizes = [10_000_000 + step for step in range(20)]  # as W3 passes a value on
    faults = {way: _faults(way, sizes) for way in ("kept", "4 MiB")}
    # About 98,000 pages faulted in with blocks of up to 4 MiB kept (each 10 MB block mapped
    # afresh, twice a value), about 5,000 with the gateway's setting (the heap grows once).
    assert faults["kept"] * 5 < faults["4 MiB"], faults


def _collections_during(work: Callable[[], object]) -> int:
    runs: list[int] = []

    def count(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(1)

    gc.callbacks.append(count)
    try:
        work()
    finally:
        gc.callbacks.remove(count)
    return len(runs)


def _allocate() -> object:
    return [(index, [index]) for index in range(50_000)]


def test_no_collection_runs_while_paused_and_the_collector_runs_again_after() -> None:
    assert gc.isenabled()
    assert _collections_during(_allocate) > 0  # the count sees collections at all
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():  # nested, as a scan inside a tokenize
            assert _collections_during(_allocate) == 0
        assert not gc.isenabled()  # the outer block is still open
    assert gc.isenabled()


def test_blocks_in_several_threads_resume_the_collector_when_the_last_closes() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with collection_paused():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with collection_paused():
            second_in.set()
            first_out.wait(10)
            seen.append(gc.isenabled())  # the first closed, this one is open

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == [False]
    assert gc.isenabled()


def test_a_collector_turned_off_before_stays_off() -> None:
    gc.disable()
    try:
        with collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_long_dense_text_is_scanned_with_one_collection_at_most() -> None:
    from codemode.privacy.detectors import DetectorSet

    line = "Ada Lovelace <ada{}@example.com>, +49 30 1234{:03d}, last on 2024-05-02\n"
    text = "".join(line.format(index, index % 1000) for index in range(3000))
    detectors = DetectorSet()
    found: list[object] = []
    # The scan unpaused: its allocations start collections all along.
    assert _collections_during(lambda: detectors._detect_now(text)) > 3
    # Paused: at most the one its allocations made due, when the collector runs again.
    assert _collections_during(lambda: found.extend(detectors._detect(text))) <= 1
    assert len(found) >= 6000  # every address and number: thousands of objects made
    assert gc.isenabled()


def _full_collections_while_growing() -> int:
    """Full collections while a session's store grows to 300,000 long-lived objects, in a
    process whose start-up objects are frozen (as a gateway's are)."""
    fulls: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            fulls.append(1)

    kept: list[list[int]] = []
    freeze_startup_objects()
    gc.collect()  # the collector's count of old objects starts from what is not frozen
    gc.callbacks.append(count)
    try:
        for step in range(300):
            kept.extend([step, index] for index in range(1000))
    finally:
        gc.callbacks.remove(count)
        gc.unfreeze()
    return len(fulls)


def test_a_gateway_walks_every_object_far_less_often_as_its_sessions_grow() -> None:
    from codemode.heap import FULL_COLLECTION_EVERY, space_out_full_collections

    before = gc.get_threshold()
    try:
        # Young collections every 100 new objects (Python's own: 700), so that a growth a test
        # can afford makes as many of them as a gateway's sessions do in a while.
        gc.set_threshold(100, 10, 10)  # then a full one after every 10 of the middle one's
        default = _full_collections_while_growing()
        assert space_out_full_collections() == (100, 10, 10)
        assert gc.get_threshold() == (100, 10, FULL_COLLECTION_EVERY)
        spaced = _full_collections_while_growing()
    finally:
        gc.set_threshold(*before)
    assert default >= 8, default  # the growth makes Python walk everything again and again
    assert spaced * 4 <= default, (spaced, default)


def test_serving_spaces_out_full_collections_and_puts_them_back_after(
    codemode_program: Program,
) -> None:

    program = (
        "import asyncio, gc\n"
        "import codemode.gateway.serve as serving\n"
        "class Engine:\n"
        "    def __init__(self, *args, **kwargs): pass\n"
        "    async def __aenter__(self):\n"
        "        print('serving', gc.get_threshold())\n"
        "        raise SystemExit(0)\n"
        "    async def __aexit__(self, *exc): return None\n"
        "serving.Codemode = Engine\n"
        "from codemode.config import CodemodeConfig\n"
        "try:\n"
        "    asyncio.run(serving.serve(CodemodeConfig(servers={})))\n"
        "except SystemExit:\n"
        "    print('after', gc.get_threshold())\n"
    )
    done = codemode_program(program)
    lines = done.stdout.splitlines()
    assert lines == ["serving (700, 10, 100)", "after (700, 10, 10)"], done.stdout + done.stderr

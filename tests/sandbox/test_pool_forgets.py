"""A sandbox its session has stopped is not kept by the pool: an idle gateway starts no new
sandbox (the moment the pool used to sweep its list), so each released session left its
sandbox's buffers and last output behind. Real bubblewrap sandboxes."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from codemode.sandbox import SandboxPool, SandboxSession, SandboxSettings
from codemode.sandbox.backends import make_backend


@pytest.fixture
def pool() -> Iterator[SandboxPool]:
    settings = SandboxSettings(pool_size=0)
    started = SandboxPool(make_backend(settings), 0).start()
    yield started
    started.close()


def _held(session: SandboxSession) -> weakref.ref[object]:
    assert session.sandbox is not None
    return weakref.ref(session.sandbox)


def test_a_released_sessions_sandbox_is_not_kept(pool: SandboxPool) -> None:
    session = SandboxSession(pool, "s1")
    assert session.execute("print('x' * 1000)").status == "ok"
    held = _held(session)
    assert session.release()
    gc.collect()
    assert held() is None


def test_a_closed_sessions_and_a_dead_sandbox_are_not_kept(pool: SandboxPool) -> None:
    closed = SandboxSession(pool, "s2")
    assert closed.execute("pass").status == "ok"
    held_closed = _held(closed)
    closed.close()
    crashed = SandboxSession(pool, "s3")
    assert crashed.execute("pass").status == "ok"
    held_crashed = _held(crashed)
    assert crashed.execute("import os\nos._exit(3)").sandbox_reset
    gc.collect()
    assert held_closed() is None and held_crashed() is None

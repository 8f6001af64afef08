"""A client's session quota frees itself: the registry alone, with sandboxes that only record.

Released sessions take no place in a client's quota; at the quota the client's least
recently used idle session is released for room; a client keeps at most ``KEPT_PER_CLIENT``
times its quota, released ones included; only running or paused sessions can fill a quota,
and the refusal names them. The gateway and engine tests run the same through real sandboxes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from codemode.engine.registry import KEPT_PER_CLIENT, SessionRegistry
from codemode.engine.session import Session
from codemode.errors import SessionQuotaError


class RecordingSandbox:
    def __init__(self) -> None:
        self.released = False
        self.closed = False

    def release(self, still_idle: Callable[[], bool]) -> bool:
        if not still_idle():
            return False
        self.released = True
        return True

    def close(self) -> None:
        self.closed = True


class NoChain:
    privacy = None

    def close(self) -> None:
        pass


def _registry(quota: int, *, evict_idle: bool = True) -> SessionRegistry:
    def factory(handle: str, owner: str | None) -> Session:
        return Session(handle, owner, RecordingSandbox(), NoChain())  # type: ignore[arg-type]

    return SessionRegistry(
        factory, idle_timeout_s=900, max_sessions=64, max_per_client=quota, evict_idle=evict_idle
    )


def _run(registry: SessionRegistry, client: str, handle: str | None = None) -> Session:
    """What an execution does to the registry: check out, take a place, run, release."""
    record = registry.checkout(handle, None, client)
    try:
        registry.make_room(record)
        record.sandbox.released = False  # type: ignore[attr-defined]  # it runs: a sandbox
    finally:
        registry.release(record)
    return record


def _sandbox(record: Session) -> Any:
    return record.sandbox


def test_at_its_quota_a_client_releases_its_least_recently_used_idle_session() -> None:
    registry = _registry(2)
    first, second = _run(registry, "alice"), _run(registry, "alice")
    third = _run(registry, "alice")
    assert _sandbox(first).released and not _sandbox(second).released
    assert registry.states(None) == {
        first.handle: "released",
        second.handle: "idle",
        third.handle: "idle",
    }
    # Run again, the released one takes a place back: the next least recently used gives it.
    _run(registry, "alice", first.handle)
    assert _sandbox(second).released and not _sandbox(third).released


def test_a_client_keeps_a_bounded_number_of_released_sessions() -> None:
    registry = _registry(1)
    opened = [_run(registry, "alice") for _ in range(KEPT_PER_CLIENT + 3)]
    kept = set(registry.handles(None))
    assert len(kept) == KEPT_PER_CLIENT
    assert kept == {record.handle for record in opened[-KEPT_PER_CLIENT:]}
    assert all(_sandbox(record).closed for record in opened[:3])


def test_sessions_running_code_fill_a_quota_and_the_refusal_names_them() -> None:
    registry = _registry(2)
    running = [registry.checkout(None, None, "alice") for _ in range(2)]
    for record in running:
        registry.make_room(record)
    with pytest.raises(SessionQuotaError) as refused:
        registry.checkout(None, None, "alice")
    message = str(refused.value)
    assert "gateway.max_sessions_per_client = 2" in message
    for record in running:
        assert f"{record.handle[:12]}... running code" in message
    assert running[0].handle not in message  # a prefix only: not a handle to use
    assert "cancel" in message and "pass the `session` handle" in message
    # Another client is served; and a finished session gives its place back.
    _run(registry, "bob")
    registry.release(running[0])
    assert not _sandbox(_run(registry, "alice")).released


def test_without_idle_release_idle_sessions_hold_the_quota_and_it_says_so() -> None:
    registry = _registry(1, evict_idle=False)
    _run(registry, "alice")
    with pytest.raises(SessionQuotaError, match=r"idle.*gateway\.idle_release_s"):
        registry.checkout(None, None, "alice")


def test_release_now_releases_an_idle_session_only() -> None:
    registry = _registry(4)
    idle = _run(registry, "alice")
    busy = registry.checkout(None, None, "alice")
    assert not registry.release_now(busy.handle)
    assert registry.release_now(idle.handle) and _sandbox(idle).released
    assert not registry.release_now(idle.handle)  # already released
    assert not registry.release_now("s_unknown")

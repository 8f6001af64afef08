"""Session handles: unguessable, bound to their owner, expired when idle, counted per client.

A client (an owner's credential, or one connection) may hold ``max_per_client`` sessions, so
one client cannot fill the gateway for the others; ``max_sessions`` bounds them all.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from typing import Literal

from codemode.engine.session import Session
from codemode.errors import SessionQuotaError, UnknownSessionError

__all__ = ["SessionFactory", "SessionRegistry", "SessionState"]

# Builds the session for a new handle (its sandbox and chain of wrappers).
SessionFactory = Callable[[str, str | None], Session]
SessionState = Literal["running", "paused", "idle", "released"]


class SessionRegistry:
    """Thread-safe map of session handles to sessions."""

    def __init__(
        self,
        factory: SessionFactory,
        *,
        idle_timeout_s: float,
        max_sessions: int,
        max_per_client: int | None = None,
    ) -> None:
        self.factory = factory
        self.idle_timeout_s = idle_timeout_s
        self.max_sessions = max_sessions
        self.max_per_client = max_per_client
        self._sessions: dict[str, Session] = {}
        # handle -> the client it counts against (absent: counted only in the total).
        self._clients: dict[str, str] = {}
        self._lock = threading.Lock()
        # Called (on any thread) when a session closes or expires: wipe vaults, deny approvals.
        self.on_close: list[Callable[[Session], None]] = []

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def open(self, owner: str | None, client: str | None = None) -> Session:
        self.expire_idle()
        with self._lock:
            idle = f"{self.idle_timeout_s / 60:g} minutes"
            if client is not None and self.max_per_client is not None:
                held = sum(1 for key in self._clients.values() if key == client)
                if held >= self.max_per_client:
                    raise SessionQuotaError(
                        f"this client already holds {held} sessions, its quota "
                        f"(gateway.max_sessions_per_client = {self.max_per_client})",
                        fix="pass the `session` handle from an earlier result to reuse one; "
                        f"sessions unused for {idle} are closed and free the quota",
                    )
            if len(self._sessions) >= self.max_sessions:
                raise SessionQuotaError(
                    f"the gateway holds {len(self._sessions)} sessions, its limit "
                    f"(gateway.max_sessions = {self.max_sessions})",
                    fix="pass the `session` handle from an earlier result to reuse one; "
                    f"sessions unused for {idle} are closed, or raise gateway.max_sessions",
                )
            handle = "s_" + secrets.token_urlsafe(18)
            record = self.factory(handle, owner)
            self._sessions[handle] = record
            if client is not None:
                self._clients[handle] = client
            return record

    def resume(self, handle: str, owner: str | None) -> Session:
        """Check out a session under an earlier handle that is not open here any more (its
        checkpoint survived a gateway restart); the caller has checked the owner."""
        with self._lock:
            if handle not in self._sessions:
                if len(self._sessions) >= self.max_sessions:
                    raise SessionQuotaError(
                        f"the gateway holds {len(self._sessions)} sessions, its limit "
                        f"(gateway.max_sessions = {self.max_sessions})",
                        fix="close sessions you no longer need, or raise gateway.max_sessions",
                    )
                self._sessions[handle] = self.factory(handle, owner)
        return self.checkout(handle, owner)

    def get(self, handle: str, owner: str | None) -> Session:
        with self._lock:
            record = self._sessions.get(handle)
            # A foreign handle looks exactly like an unknown one: no oracle for guessing.
            if record is None or (record.owner is not None and record.owner != owner):
                raise UnknownSessionError(
                    f"unknown or expired session {handle[:12]!r}",
                    fix="omit `session` to start over in a new or default session (files and "
                    "variables start empty)",
                )
            record.last_used = time.monotonic()
            return record

    def handles(self, owner: str | None, *, idle_only: bool = False) -> list[str]:
        """The handles of ``owner``'s sessions (exactly that owner: None lists anonymous ones);
        ``idle_only``: only those not running code now."""
        with self._lock:
            return [
                handle
                for handle, record in self._sessions.items()
                if record.owner == owner and not (idle_only and record.busy)
            ]

    def states(self, owner: str | None) -> dict[str, SessionState]:
        """What each of ``owner``'s sessions is doing: running code (``running``), waiting
        for an approval (``paused``), holding an idle sandbox (``idle``), or holding none
        since its sandbox was released (``released``: the next execution restores it)."""
        with self._lock:
            return {
                handle: _state(record)
                for handle, record in self._sessions.items()
                if record.owner == owner
            }

    def checkout(self, handle: str | None, owner: str | None, client: str | None = None) -> Session:
        record = self.open(owner, client) if handle is None else self.get(handle, owner)
        with self._lock:
            record.busy += 1
        return record

    def release(self, record: Session) -> None:
        with self._lock:
            record.busy -= 1
            record.last_used = time.monotonic()

    def hold_idle(self, idle_s: float) -> list[Session]:
        """Hold (as busy, so nothing closes them) the sessions unused for ``idle_s`` seconds
        that run nothing, wait for no approval and are not released yet. ``settle`` each."""
        now = time.monotonic()
        with self._lock:
            held = [
                record
                for record in self._sessions.values()
                if record.busy == 0
                and record.paused is None
                and now - record.last_used >= idle_s
                and not record.released
            ]
            for record in held:
                record.busy += 1
        return held

    def held_alone(self, record: Session, idle_s: float) -> bool:
        """Still idle, and held by nobody but the one caller of ``hold_idle``."""
        with self._lock:
            return (
                record.busy == 1
                and record.paused is None
                and time.monotonic() - record.last_used >= idle_s
            )

    def settle(self, record: Session) -> None:
        """Let go of a session ``hold_idle`` held (it stays as idle as it was)."""
        with self._lock:
            record.busy -= 1

    def close(self, handle: str) -> bool:
        with self._lock:
            record = self._sessions.pop(handle, None)
            self._clients.pop(handle, None)
        if record is None:
            return False
        self._closed(record)
        return True

    def _closed(self, record: Session) -> None:
        for hook in self.on_close:
            hook(record)
        record.close()

    def expire_idle(self) -> list[str]:
        expired = self.expire_idle_records()
        for record in expired:
            self._closed(record)
        return [record.handle for record in expired]

    def expire_idle_records(self) -> list[Session]:
        """Take the sessions idle for longer than the timeout out of the registry (not closed)."""
        now = time.monotonic()
        with self._lock:
            expired = [
                record
                for record in self._sessions.values()
                if record.busy == 0 and now - record.last_used > self.idle_timeout_s
            ]
            for record in expired:
                del self._sessions[record.handle]
                self._clients.pop(record.handle, None)
        return expired

    def close_all(self) -> None:
        with self._lock:
            records = list(self._sessions.values())
            self._sessions.clear()
            self._clients.clear()
        for record in records:
            self._closed(record)


def _state(record: Session) -> SessionState:
    if record.paused is not None:
        return "paused"
    if record.busy:
        return "running"
    return "released" if record.released else "idle"

"""Session handles: unguessable, bound to their owner, expired when idle."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable

from codemode.engine.session import Session
from codemode.errors import SessionError, UnknownSessionError

__all__ = ["SessionFactory", "SessionRegistry"]

# Builds the session for a new handle (its sandbox and chain of wrappers).
SessionFactory = Callable[[str, str | None], Session]


class SessionRegistry:
    """Thread-safe map of session handles to sessions."""

    def __init__(
        self, factory: SessionFactory, *, idle_timeout_s: float, max_sessions: int
    ) -> None:
        self.factory = factory
        self.idle_timeout_s = idle_timeout_s
        self.max_sessions = max_sessions
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        # Called (on any thread) when a session closes or expires: wipe vaults, deny approvals.
        self.on_close: list[Callable[[Session], None]] = []

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def open(self, owner: str | None) -> Session:
        self.expire_idle()
        with self._lock:
            if len(self._sessions) >= self.max_sessions:
                raise SessionError(
                    f"too many sessions ({self.max_sessions}); close or reuse one",
                    fix="pass the `session` handle from an earlier result, or raise "
                    "gateway.max_sessions",
                )
            handle = "s_" + secrets.token_urlsafe(18)
            record = self.factory(handle, owner)
            self._sessions[handle] = record
            return record

    def resume(self, handle: str, owner: str | None) -> Session:
        """Check out a session under an earlier handle that is not open here any more (its
        checkpoint survived a gateway restart); the caller has checked the owner."""
        with self._lock:
            if handle not in self._sessions:
                if len(self._sessions) >= self.max_sessions:
                    raise SessionError(
                        f"too many sessions ({self.max_sessions}); close or reuse one",
                        fix="raise gateway.max_sessions",
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
                    fix="omit `session` to start a new one (files and variables start empty)",
                )
            record.last_used = time.monotonic()
            return record

    def checkout(self, handle: str | None, owner: str | None) -> Session:
        record = self.open(owner) if handle is None else self.get(handle, owner)
        with self._lock:
            record.busy += 1
        return record

    def release(self, record: Session) -> None:
        with self._lock:
            record.busy -= 1
            record.last_used = time.monotonic()

    def close(self, handle: str) -> bool:
        with self._lock:
            record = self._sessions.pop(handle, None)
        if record is None:
            return False
        self._closed(record)
        return True

    def _closed(self, record: Session) -> None:
        for hook in self.on_close:
            hook(record)
        record.close()

    def expire_idle(self) -> list[str]:
        now = time.monotonic()
        with self._lock:
            expired = [
                record
                for record in self._sessions.values()
                if record.busy == 0 and now - record.last_used > self.idle_timeout_s
            ]
            for record in expired:
                del self._sessions[record.handle]
        for record in expired:
            self._closed(record)
        return [record.handle for record in expired]

    def close_all(self) -> None:
        with self._lock:
            records = list(self._sessions.values())
            self._sessions.clear()
        for record in records:
            self._closed(record)

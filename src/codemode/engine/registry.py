"""Session handles: unguessable, bound to their owner, expired when idle, counted per client.

Two limits bound what sessions cost the machine. ``max_sessions`` bounds the sessions that hold
a sandbox (processes and memory): running code, paused for an approval, or idle with their
sandbox still up. A session claims one of those places (``make_room``) just before its code
runs; when all are taken and ``evict_idle`` is on, the least recently used idle session is
checkpointed and its sandbox released to make room, exactly as idle release does
(``codemode.engine.idle``), and it restores on its next execution. Released sessions hold no
sandbox and do not count there. ``max_stored`` bounds every handle kept, released ones
included (their checkpoints take disk). A client (an owner's credential, or the one stdio
client) may hold ``max_per_client`` sessions that take a sandbox, so one client cannot fill the
gateway for the others; its released sessions do not count, and at its quota its least
recently used idle session is released to make room (``_within_client_quota``), so sessions
nobody uses never keep a client out. Only sessions running code or waiting for an approval
can fill a quota, and the refusal names them.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Literal, NoReturn

from codemode.engine.session import Session
from codemode.errors import SessionQuotaError, UnknownSessionError

__all__ = ["SessionFactory", "SessionRegistry", "SessionState", "holds_because", "new_handle"]

# Builds the session for a new handle (its sandbox and chain of wrappers).
SessionFactory = Callable[[str, str | None], Session]
SessionState = Literal["running", "paused", "idle", "released"]
# A client keeps at most this many times its quota of sessions, released ones included.
KEPT_PER_CLIENT = 4

log = logging.getLogger(__name__)


class SessionRegistry:
    """Thread-safe map of session handles to sessions."""

    # Where the limits apply, as the quota errors say it.
    where = "the gateway"

    def __init__(
        self,
        factory: SessionFactory,
        *,
        idle_timeout_s: float,
        max_sessions: int,
        max_per_client: int | None = None,
        max_stored: int = 1024,
        evict_idle: bool = False,
    ) -> None:
        self.factory = factory
        self.idle_timeout_s = idle_timeout_s
        self.max_sessions = max_sessions
        self.max_per_client = max_per_client
        # Every session holding a sandbox is kept too (the config refuses a smaller value).
        self.max_stored = max(max_stored, max_sessions)
        # Release the least recently used idle session when a session needs a sandbox and
        # ``max_sessions`` hold one (on when idle release is).
        self.evict_idle = evict_idle
        self._sessions: dict[str, Session] = {}
        # handle -> the client it counts against (absent: counted only in the total).
        self._clients: dict[str, str] = {}
        # The sessions that hold (or are about to start) a sandbox: at most max_sessions.
        self._live: set[str] = set()
        # Opened here and never run: closed if refused a sandbox (nothing of them to keep).
        self._unused: set[str] = set()
        self._lock = threading.Lock()
        self._closing = False  # close_all began
        # Called (on any thread) when a session closes or expires: wipe vaults, deny approvals.
        self.on_close: list[Callable[[Session], None]] = []

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def open(self, owner: str | None, client: str | None = None) -> Session:
        self.expire_idle()
        with self._lock:
            if client is not None and self.max_per_client is not None:
                holding = self._holding(client)
                # At the quota a new session is still let in when one of the client's idle
                # sessions can give its place back (``make_room`` releases it).
                if len(holding) >= self.max_per_client and self._idle_of(holding, []) is None:
                    raise self._client_quota_full(holding)
                kept = self._kept_by(client)
                if len(kept) >= self._max_kept_per_client() and not self._forgettable(kept):
                    raise self._client_quota_full(holding)
            self._check_stored()
            return self._add(new_handle(), owner, client)

    def _add(self, handle: str, owner: str | None, client: str | None) -> Session:
        """Build and keep a new session (call with the lock held)."""
        record = self.factory(handle, owner)
        self._sessions[handle] = record
        self._unused.add(handle)
        if client is not None:
            self._clients[handle] = client
        return record

    def _holding(self, client: str) -> list[Session]:
        """The sessions that take a place in ``client``'s quota (call with the lock held):
        all but those released and not checked out (they hold no sandbox)."""
        return [
            record
            for handle, key in self._clients.items()
            if key == client
            and (record := self._sessions.get(handle)) is not None
            and not (record.released and record.busy == 0)
        ]

    def _kept_by(self, client: str) -> list[Session]:
        """Every session of ``client`` kept here, released ones included."""
        return [
            record
            for handle, key in self._clients.items()
            if key == client and (record := self._sessions.get(handle)) is not None
        ]

    def _max_kept_per_client(self) -> int:
        # Released sessions keep a checkpoint on disk: a client keeps a few times its quota,
        # so one client cannot fill ``max_stored`` for the others.
        return KEPT_PER_CLIENT * (self.max_per_client or 0)

    @staticmethod
    def _forgettable(records: list[Session]) -> list[Session]:
        """Released sessions nobody uses now, least recently used first."""
        idle = [r for r in records if r.released and r.busy == 0 and r.paused is None]
        return sorted(idle, key=lambda record: record.last_used)

    def _idle_of(self, records: list[Session], tried: list[Session]) -> Session | None:
        """The least recently used of ``records`` that could be released now, if any."""
        if not self.evict_idle:
            return None
        idle = [
            record
            for record in records
            if record.busy == 0
            and record.paused is None
            and not record.released
            and record not in tried
        ]
        return min(idle, key=lambda record: record.last_used, default=None)

    def _client_quota_full(self, holding: list[Session]) -> SessionQuotaError:
        shown = sorted(holding, key=lambda record: record.last_used)
        return self.quota_refusal(
            f"this client's {len(holding)} sessions hold its quota",
            [(record.handle, holds_because(record)) for record in shown],
        )

    def quota_refusal(
        self, what: str, held: list[tuple[str, str]], *, elsewhere: str = ""
    ) -> SessionQuotaError:
        """A client at its quota: ``what`` holds it, each ``held`` session (handle, what it
        does), how to free a place (``elsewhere``: how sessions elsewhere free theirs)."""
        listed = "; ".join(f"{handle[:12]}... {why}" for handle, why in held)
        if not self.evict_idle:
            free = "set gateway.idle_release_s so idle sessions give their place back"
        else:
            free = "a session gives its place back once released (idle, its checkpoint saved)"
        return SessionQuotaError(
            f"{what} (gateway.max_sessions_per_client = {self.max_per_client}): {listed}",
            fix="let a running session finish or cancel its call, answer a paused one's "
            "approval (approve), or pass the `session` handle from an earlier result to reuse "
            f"one; {free}{elsewhere}, or raise gateway.max_sessions_per_client",
        )

    def resume(self, handle: str, owner: str | None) -> Session:
        """Check out a session under an earlier handle that is not open here any more (its
        checkpoint survived a gateway restart); the caller has checked the owner."""
        with self._lock:
            if handle not in self._sessions:
                self._check_stored()
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

    def sessions(self) -> list[Session]:
        """Every session kept now, of every owner (a snapshot; nothing is touched)."""
        with self._lock:
            return list(self._sessions.values())

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

    def settle(self, record: Session, heir: Session | None = None) -> None:
        """Let go of a session ``hold_idle`` held (it stays as idle as it was). Released and
        wanted by nobody meanwhile, it gives its place among the sessions that hold a sandbox
        back, to ``heir`` when one waits for it (``make_room``)."""
        with self._lock:
            if record.released and record.busy == 1:
                self._live.discard(record.handle)
                if heir is not None and self._sessions.get(heir.handle) is heir:
                    self._admit(heir)  # the place it just gave back: nobody else takes it
            record.busy -= 1

    def make_room(self, record: Session) -> None:
        """Before ``record`` (checked out) runs code: give it a place among the
        ``max_sessions`` sessions that hold a sandbox. When all are taken, release the least
        recently used idle session (checkpoint, then stop its sandbox, as idle release does:
        never one running code or paused) if ``evict_idle``; ``SessionQuotaError`` when none
        can be released. Blocking (a checkpoint runs in that sandbox): call it from a worker
        thread; the registry's lock is not held meanwhile."""
        self._within_client_quota(record)
        tried: list[Session] = []
        while True:
            with self._lock:
                if self._sessions.get(record.handle) is not record or record.handle in self._live:
                    return  # closed meanwhile (its sandbox says so), or holding a place
                self._prune()
                if len(self._live) < self.max_sessions:
                    self._admit(record)
                    return
                victim = self._least_recent_idle(tried) if self.evict_idle else None
                if victim is None:
                    error, unused = self._live_full(tried), record.handle in self._unused
                else:
                    victim.busy += 1  # held as the idle releaser holds it: nothing closes it
            if victim is None:
                self._refuse(record, error, unused)
            tried.append(victim)
            self._release_for(victim, record)

    def _refuse(self, record: Session, error: Exception, unused: bool) -> NoReturn:
        if unused:  # a new session that never ran: nothing of it is worth keeping
            self.close(record.handle)
        raise error

    def _within_client_quota(self, record: Session) -> None:
        """Before ``record`` runs: when its client holds its whole quota without it, release
        the client's least recently used idle session (checkpointed; it restores when used
        again), so a client's quota never stays taken by sessions nobody uses.
        ``SessionQuotaError``, naming what holds the quota, when none can be released."""
        tried: list[Session] = []
        while True:
            with self._lock:
                client = self._clients.get(record.handle)
                if (
                    client is None
                    or self.max_per_client is None
                    or self._sessions.get(record.handle) is not record
                ):
                    return
                doomed = self._take_beyond_kept(client, record)
            for old in doomed:  # outside the lock: closing runs the close hooks
                self._closed(old)
            with self._lock:
                others = [held for held in self._holding(client) if held is not record]
                if len(others) < self.max_per_client:
                    return
                victim = self._idle_of(others, tried)
                if victim is None:
                    error = self._client_quota_full([*others, record])
                    unused = record.handle in self._unused
                else:
                    victim.busy += 1  # held as the idle releaser holds it: nothing closes it
            if victim is None:
                self._refuse(record, error, unused)
            tried.append(victim)
            self._release_for(victim, None)

    def _take_beyond_kept(self, client: str, record: Session) -> list[Session]:
        """Take ``client``'s least recently used released sessions beyond what a client may
        keep out of the registry (call with the lock held; the caller closes them)."""
        kept = [held for held in self._kept_by(client) if held is not record]
        excess = len(kept) + 1 - self._max_kept_per_client()
        doomed = self._forgettable(kept)[: max(excess, 0)]
        for old in doomed:
            self._forget(old.handle)
            log.info("client quota: closed the released session %s", old.handle[:12])
        return doomed

    def release_now(self, handle: str) -> bool:
        """Checkpoint ``handle``'s session and stop its sandbox now, if it is idle (its
        client went away); it restores on its next execution. Blocking: call it from a
        worker thread. False when it runs code, waits for an approval or holds no sandbox."""
        with self._lock:
            record = self._sessions.get(handle)
            if record is None or record.busy or record.paused is not None or record.released:
                return False
            if self._closing:
                return False  # the gateway stops: close_all keeps every session's checkpoint
            record.busy += 1
        released = False
        try:
            released = record.release(lambda: self.held_alone(record, 0.0))
        except Exception:
            log.exception("could not release the session %s", handle[:12])
        finally:
            self.settle(record)
        return released

    def _release_for(self, victim: Session, heir: Session | None) -> None:
        """Release ``victim`` (held) so that ``heir`` (if any) gets its place."""
        released = False
        try:
            released = victim.release(lambda: self.held_alone(victim, 0.0))
        except Exception:
            log.exception("could not release the idle session %s", victim.handle[:12])
        finally:
            self.settle(victim, heir if released else None)

    def _admit(self, record: Session) -> None:
        self._live.add(record.handle)
        self._unused.discard(record.handle)

    def _prune(self) -> None:
        """Forget the places of sessions that hold no sandbox any more (released while a
        file listing had them checked out) or are gone."""
        for handle in list(self._live):
            record = self._sessions.get(handle)
            if record is None or (record.busy == 0 and record.released):
                self._live.discard(handle)

    def _least_recent_idle(self, tried: list[Session]) -> Session | None:
        idle = [
            record
            for handle in self._live
            if (record := self._sessions[handle]).busy == 0
            and record.paused is None
            and not record.released
            and record not in tried
        ]
        return min(idle, key=lambda record: record.last_used, default=None)

    def _live_full(self, tried: list[Session]) -> SessionQuotaError:
        held = f"{len(self._live)} sessions hold a sandbox in {self.where}, the limit "
        held += f"(gateway.max_sessions = {self.max_sessions})"
        if not self.evict_idle:
            return SessionQuotaError(
                f"{held}, and idle sessions keep theirs (gateway.idle_release_s = 0)",
                fix="pass the `session` handle from an earlier result to reuse a session, set "
                "gateway.idle_release_s so idle sessions give their sandbox back, or raise "
                "gateway.max_sessions",
            )
        why = "running code or waiting for an approval"
        if tried:
            why += f", or idle but not releasable now ({len(tried)} tried: a checkpoint too big "
            why += "to save, or code that arrived meanwhile)"
        return SessionQuotaError(
            f"{held}, all {why}",
            fix="retry when one of them finishes, pass the `session` handle from an earlier "
            "result to reuse a session, or raise gateway.max_sessions",
        )

    def _check_stored(self) -> None:
        if len(self._sessions) < self.max_stored:
            return
        raise SessionQuotaError(
            f"{self.where} keeps {len(self._sessions)} sessions, its limit "
            f"(gateway.max_stored_sessions = {self.max_stored}; released sessions count, "
            "their checkpoints take disk)",
            fix="pass the `session` handle from an earlier result to reuse one; sessions "
            f"unused for {self.idle_timeout_s / 60:g} minutes are closed, or raise "
            "gateway.max_stored_sessions",
        )

    def _forget(self, handle: str) -> Session | None:
        """Take ``handle`` out of the registry (call with the lock held; not closed)."""
        self._clients.pop(handle, None)
        self._live.discard(handle)
        self._unused.discard(handle)
        return self._sessions.pop(handle, None)

    def close(self, handle: str) -> bool:
        with self._lock:
            record = self._forget(handle)
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
                self._forget(record.handle)
        return expired

    def close_all(self) -> None:
        with self._lock:
            self._closing = True
            records = list(self._sessions.values())
            for record in records:
                self._forget(record.handle)
        for record in records:
            self._closed(record)


def new_handle() -> str:
    """A new session handle: unguessable, so it is its own credential within its owner."""
    return "s_" + secrets.token_urlsafe(18)


def holds_because(record: Session) -> str:
    """What a session holding a place in its client's quota is doing."""
    if record.paused is not None:
        return "waiting for an approval"
    if record.busy:
        return "running code"
    return "idle"


def _state(record: Session) -> SessionState:
    if record.paused is not None:
        return "paused"
    if record.busy:
        return "running"
    return "released" if record.released else "idle"

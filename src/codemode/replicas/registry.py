"""``SharedSessionRegistry``: the session registry of one replica among several.

The sandboxes stay local (a replica runs the sessions it holds); which sessions exist, who owns
them and who runs them now is in the ``SessionDirectory``. Checking a session out claims its
lease; a session another replica holds is busy; a session last run by another replica (or
that replica died) continues here: the ``Handover`` says whether its sandbox must be rebuilt
from its checkpoint (a local sandbox: yes) or can be reattached (a sandbox every replica
reaches by name, like a cluster backend's).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from codemode.engine.handover import Handover
from codemode.engine.registry import SessionFactory, SessionRegistry, holds_because, new_handle
from codemode.engine.session import Session
from codemode.errors import (
    SessionBusyError,
    SessionQuotaError,
    StateStoreError,
    UnknownSessionError,
)
from codemode.replicas.directory import Claim, SessionDirectory

__all__ = ["Handover", "RestoreFromCheckpoint", "SharedSessionRegistry"]

log = logging.getLogger(__name__)


class RestoreFromCheckpoint:
    """Local sandboxes die with their replica (or go stale): always restore."""

    def restore_needed(self, handle: str, previous: str) -> bool:
        return True


class SharedSessionRegistry(SessionRegistry):
    """``max_sessions`` and ``max_stored`` count this replica's sessions: the sandboxes it runs
    and the copies it keeps (a session released here restores on any replica). A client's
    quota (``max_per_client``) counts its sessions on every replica, in the directory; a
    session released here leaves that count (``settle``) and rejoins it, or is refused, before
    it runs code again on any replica (``make_room``)."""

    where = "this replica"

    def __init__(
        self,
        factory: SessionFactory,
        *,
        directory: SessionDirectory,
        restoring: set[str],
        forget: Callable[[str], None],
        handover: Handover | None = None,
        idle_timeout_s: float,
        max_sessions: int,
        max_per_client: int | None = None,
        max_stored: int = 1024,
        evict_idle: bool = False,
    ) -> None:
        super().__init__(
            factory,
            idle_timeout_s=idle_timeout_s,
            max_sessions=max_sessions,
            max_per_client=max_per_client,
            max_stored=max_stored,
            evict_idle=evict_idle,
        )
        self.directory = directory
        # The engine's set of handles whose new session restores its checkpoint.
        self.restoring = restoring
        self.forget = forget
        self.handover = handover or RestoreFromCheckpoint()
        # Handles whose place in their client's count was given back (released): they
        # rejoin it before running code. Changed with ``_count_lock`` held, so a release
        # and a rejoin of one session reach the store in the order they happen here.
        self._uncounted: set[str] = set()
        self._count_lock = threading.Lock()

    @property
    def replica(self) -> str:
        return self.directory.replica

    def open(self, owner: str | None, client: str | None = None) -> Session:
        self.expire_idle()
        with self._lock:
            self._check_stored()
        # A new handle: no other replica can hold it. The client's count is checked and the
        # handle added to it in one step, so two replicas never both take its last place.
        handle = new_handle()
        quota = self.max_per_client if client is not None else None
        opened = self.directory.create(handle, owner, client, quota)
        if opened.status == "full":
            raise self._client_full(opened)
        try:
            with self._lock:
                self._check_stored()  # again: another open may have taken the last place
                return self._add(handle, owner, client)
        except BaseException:
            self._unregister(handle)
            raise

    def _unregister(self, handle: str) -> None:
        """A session registered in the directory that could not be built here: forget it."""
        try:
            self.forget(handle)
        except StateStoreError:  # its entry and its place in the count then expire alone
            log.warning("could not forget the session %s", handle[:12], exc_info=True)

    def _client_full(self, refused: Claim) -> SessionQuotaError:
        return self.quota_refusal(
            f"this client already holds {refused.held} sessions across all gateway replicas "
            "(counted in the shared store), its quota",
            self._describe(list(refused.holding)),
            elsewhere="; a session closed on any replica frees its place at once (any "
            "replica continues a session whose handle you pass)",
        )

    def _describe(self, handles: list[str]) -> list[tuple[str, str]]:
        """What each of a client's counted sessions is doing, as far as this replica sees."""
        try:
            leases = self.directory.leases(handles)
        except StateStoreError:
            leases = [None] * len(handles)
        with self._lock:
            local = [self._sessions.get(handle) for handle in handles]
        described = []
        for handle, lease, record in zip(handles, leases, local, strict=True):
            if record is not None and lease in (None, self.replica):
                why = f"{holds_because(record)} on this replica"
            elif lease is not None:
                why = f"running code or waiting for an approval on replica {lease}"
            else:
                why = "idle on another replica"
            described.append((handle, why))
        return described

    def checkout(self, handle: str | None, owner: str | None, client: str | None = None) -> Session:
        if handle is None:
            return super().checkout(None, owner, client)
        claim = self.directory.claim(handle, owner)
        if claim.status == "busy":
            raise _busy(handle, claim)
        if claim.status == "closed":  # closed through another replica: drop any copy here
            self._drop_closed(handle)
        if claim.status == "unknown":
            # Not in the directory (expired there, or a checkpoint being resumed): local only.
            record = super().checkout(handle, owner, client)
            registered = self.directory.create(handle, owner, self.client_of(handle))
            if registered.status != "ok":
                super().release(record)
                if registered.status == "busy":
                    raise _busy(handle, registered)
                raise UnknownSessionError(f"unknown or expired session {handle[:12]!r}")
            return record
        try:
            record = self._checkout_claimed(handle, owner, claim.replica)
        except BaseException:
            self.directory.release(handle)
            raise
        if claim.client:  # counted against it here too (its place is kept fresh from here)
            with self._lock:
                if self._sessions.get(handle) is record:
                    self._clients[handle] = claim.client
                    if claim.released:  # it rejoins the count before its code runs
                        self._uncounted.add(handle)
        return record

    def settle(self, record: Session, heir: Session | None = None) -> None:
        with self._count_lock:
            with self._lock:
                client = self._clients.get(record.handle)
                leaving = (
                    client is not None
                    and record.released
                    and record.busy == 1
                    and record.handle not in self._uncounted
                    and self._sessions.get(record.handle) is record
                )
            if leaving:
                assert client is not None
                self._leave_count(record.handle, client)
            super().settle(record, heir)

    def _leave_count(self, handle: str, client: str) -> None:
        """``handle`` was released here: its client's place is free on every replica."""
        try:
            self.directory.uncount(handle, client)
        except StateStoreError:  # its place then lapses with its idle time
            log.warning("could not free the quota place of %s", handle[:12], exc_info=True)
            return
        with self._lock:
            self._uncounted.add(handle)

    def make_room(self, record: Session) -> None:
        self._rejoin(record)
        super().make_room(record)

    def _rejoin(self, record: Session) -> None:
        """Before a released session runs code: it takes a place in its client's count
        again; ``SessionQuotaError`` (it stays released) when the client's quota is full."""
        with self._count_lock:
            with self._lock:
                client = self._clients.get(record.handle)
                if client is None or record.handle not in self._uncounted:
                    return
            rejoined = self.directory.rejoin(record.handle, client, self.max_per_client)
            if rejoined.status == "full":
                raise self._client_full(rejoined)
            with self._lock:
                self._uncounted.discard(record.handle)

    def _forget(self, handle: str) -> Session | None:
        self._uncounted.discard(handle)
        return super()._forget(handle)

    def client_of(self, handle: str) -> str | None:
        """The client ``handle`` counts against, when this replica knows it."""
        with self._lock:
            return self._clients.get(handle)

    def clients(self, handles: list[str]) -> dict[str, str]:
        """The clients of those of ``handles`` that count against one (for ``renew``)."""
        with self._lock:
            return {h: self._clients[h] for h in handles if h in self._clients}

    def _drop_closed(self, handle: str) -> None:
        with self._lock:
            stale = self._sessions.get(handle)
            if stale is not None and stale.busy == 0:
                self._forget(handle)
            else:
                stale = None
        if stale is not None:
            self._closed(stale)
        raise UnknownSessionError(
            f"unknown or expired session {handle[:12]!r}",
            fix="omit `session` to start over in a new session (files and variables start empty)",
        )

    def _checkout_claimed(self, handle: str, owner: str | None, previous: str) -> Session:
        moved = previous not in ("", self.replica)
        with self._lock:
            local = self._sessions.get(handle)
            if local is not None and moved and local.busy == 0:
                self._forget(handle)  # stale: the session ran elsewhere since
            elif local is not None:
                local.busy += 1
                return local
        if local is not None:
            local.close()  # only this replica's copy: the shared state stays
        restore = self.handover.restore_needed(handle, previous) if moved else True
        record = self._adopt(handle, owner, restore=restore)
        with self._lock:
            record.busy += 1
        return record

    def _adopt(self, handle: str, owner: str | None, *, restore: bool) -> Session:
        """Build this replica's copy of a session that exists in the cluster."""
        with self._lock:
            self._check_stored()  # a sandbox it gets (max_sessions) only when its code runs
        if restore:
            self.restoring.add(handle)
        try:
            record = self.factory(handle, owner)
        finally:
            self.restoring.discard(handle)
        with self._lock:
            self._sessions[handle] = record
        return record

    def release(self, record: Session) -> None:
        super().release(record)
        if record.busy == 0:
            try:
                self.directory.release(record.handle, self.client_of(record.handle))
            except Exception:  # the lease then expires by itself
                log.warning("could not release the lease of %s", record.handle, exc_info=True)

    def leased(self) -> list[str]:
        """Handles of the sessions running here now (their leases need renewing)."""
        with self._lock:
            return [handle for handle, record in self._sessions.items() if record.busy > 0]

    def close(self, handle: str) -> bool:
        closed = super().close(handle)
        self.forget(handle)
        return closed

    def expire_idle(self) -> list[str]:
        """Sessions idle here: closed for good if this replica ran them last (then they are
        idle cluster-wide), else only this replica's stale copy is dropped."""
        expired = self.expire_idle_records()
        for record in expired:
            try:
                holder = self.directory.holder(record.handle)
            except StateStoreError:  # unknown: drop the copy, the shared state expires alone
                holder = ""
            if holder in (None, self.replica):
                self._closed(record)
                self.forget(record.handle)
            else:
                record.close()
        return [record.handle for record in expired]

    def close_all(self) -> None:
        with self._lock:
            handles = list(self._sessions)
        super().close_all()
        for handle in handles:  # a stopping replica frees its leases at once
            try:
                self.directory.release(handle)
            except Exception:
                log.warning("could not release the lease of %s", handle, exc_info=True)


def _busy(handle: str, claim: Claim) -> SessionBusyError:
    return SessionBusyError(
        f"session {handle[:12]!r} is running code on another gateway replica",
        fix=f"retry in {max(claim.retry_after_s, 1.0):.0f} s (when that execution ends, or its "
        "replica is found dead), or approve its pending call",
    )

"""The ``AuditLog`` seam and its in-memory twin (for tests and for running without a disk)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from codemode.audit.events import AuditEvent, AuditFilter, event_matches

__all__ = ["AppendsMany", "AuditLog", "MemoryAuditLog", "report_unwritten"]

log = logging.getLogger("codemode.audit")


class AuditLog(Protocol):
    """An append-only store of audit events, safe to use from several threads."""

    def append(self, event: AuditEvent) -> None: ...

    def sync(self) -> bool:
        """Return once every event appended so far is stored (at once where ``append``
        stores each one itself); False if the store did not keep up."""
        ...

    def query(self, filters: AuditFilter | None = None) -> list[AuditEvent]:
        """The newest ``filters.limit`` matching events, oldest first."""
        ...

    def close(self) -> None:
        """Release the store (files, connections). Appending after close is an error."""
        ...


@runtime_checkable
class AppendsMany(Protocol):
    """A store that writes several events at once (one transaction, one round trip)."""

    def append_many(self, events: Sequence[AuditEvent]) -> None:
        """``append`` each of ``events``, in order: all of them or, on an error, none."""
        ...


def report_unwritten(event: AuditEvent, error: BaseException) -> None:
    """Say that ``event`` could not be written (auditing goes on: the gateway must not stop)."""
    log.warning(
        "could not write the audit event for %s.%s: %s",
        event.server,
        event.tool,
        type(error).__name__,
    )


class MemoryAuditLog:
    def __init__(self) -> None:
        self._events: list[AuditEvent] = []
        self._lock = threading.Lock()

    def append(self, event: AuditEvent) -> None:
        with self._lock:
            self._events.append(event)

    def sync(self) -> bool:
        return True

    def query(self, filters: AuditFilter | None = None) -> list[AuditEvent]:
        filters = filters or AuditFilter()
        with self._lock:
            found = [event for event in self._events if event_matches(event, filters)]
        if filters.limit is not None:
            found = found[-filters.limit :] if filters.limit > 0 else []
        return found

    def close(self) -> None:
        return None

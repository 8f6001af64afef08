"""Every connection through the egress proxy, as a row of the audit log.

A connection appears as a call of the pseudo-tool ``_network.connect``: the session, the
decision (allow/deny), the outcome, the duration, and a message with the host, port, address
and the bytes each way (``codemode audit --tool '_network.*'`` lists them).
"""

from __future__ import annotations

from codemode.audit import AuditEvent, AuditLog
from codemode.audit.events import argument_digest
from codemode.audit.redaction import scrub
from codemode.egress import ConnectionRecord, EgressHub
from codemode.egress.rules import authority

__all__ = ["AUDIT_SERVER", "EgressAudit", "audit_egress"]

AUDIT_SERVER = "_network"


class EgressAudit:
    """A ``RecordSink`` appending one ``AuditEvent`` per connection."""

    def __init__(self, audit_log: AuditLog, digest_key: bytes | None = None) -> None:
        self.audit_log = audit_log
        self.digest_key = digest_key

    def __call__(self, record: ConnectionRecord) -> None:
        self.audit_log.append(audit_event(record, self.digest_key))


def audit_event(record: ConnectionRecord, digest_key: bytes | None = None) -> AuditEvent:
    method = record.method or "request"
    if record.outcome == "denied":
        # A refused host is whatever the code asked for: scrubbed like any message.
        where = authority(scrub(record.host), record.port) if record.host else "(none)"
        resolved = f" (resolves to {record.address})" if record.address else ""
        message = f"{method} {where} refused{resolved}"
        if not record.host and record.reason:  # refused before a target was known
            message += f": {record.reason}"
    else:
        where = authority(record.host, record.port) if record.host else "(none)"
        via = f" via {record.address}" if record.address else ""
        message = f"{method} {where}{via}: sent {record.sent} B, received {record.received} B"
        if record.outcome == "error":
            message += f"; {record.reason}"
    private = record.error_code == "egress_private_address"
    return AuditEvent(
        time=record.time,
        session=record.session,
        server=AUDIT_SERVER,
        tool="connect",
        args_digest=argument_digest({"host": record.host, "port": record.port}, key=digest_key),
        decision="deny" if record.outcome == "denied" else "allow",
        duration_ms=record.duration_ms,
        outcome=record.outcome,
        error_code=record.error_code,
        message=message[:500],
        rule="sandbox.network.allow_private" if private else "sandbox.network.allow",
    )


def audit_egress(backend: object, audit_log: AuditLog | None, digest_key: bytes | None) -> None:
    """Point the egress proxy of ``backend`` (if it runs one) at ``audit_log``."""
    hub = getattr(backend, "egress", None)
    if isinstance(hub, EgressHub) and audit_log is not None:
        hub.sink = EgressAudit(audit_log, digest_key)

"""The audit log: one record per tool call (denials included), never arguments or PII.

AuditEvent / AuditFilter           one record; what to look for
AuditLog                           the Protocol: append(event), query(filters)
SQLiteAuditLog(path)               WAL, append-only, several threads and processes
MemoryAuditLog()                   the in-memory twin
AuditInvoker(inner, log, session)  the ToolInvoker wrapper (outside PolicyInvoker)
argument_digest(arguments)         "sha256:<hex>" of the canonical JSON
scrub(text)                        a message with PII and secrets replaced by markers
"""

from codemode.audit.events import (
    DECISIONS,
    OUTCOMES,
    AuditEvent,
    AuditFilter,
    Outcome,
    argument_digest,
    event_matches,
    format_time,
)
from codemode.audit.invoker import AuditInvoker
from codemode.audit.log import AuditLog, MemoryAuditLog
from codemode.audit.redaction import scrub
from codemode.audit.sqlite import SQLiteAuditLog

__all__ = [
    "DECISIONS",
    "OUTCOMES",
    "AuditEvent",
    "AuditFilter",
    "AuditInvoker",
    "AuditLog",
    "MemoryAuditLog",
    "Outcome",
    "SQLiteAuditLog",
    "argument_digest",
    "event_matches",
    "format_time",
    "scrub",
]

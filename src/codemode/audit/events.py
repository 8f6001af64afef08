"""One audit record per tool call, the filters to query them, and the argument digest."""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any, Literal

from codemode.audit.canonical import canonical_pieces
from codemode.policy.outcome import Verdict

__all__ = [
    "DECISIONS",
    "OUTCOMES",
    "AuditEvent",
    "AuditFilter",
    "Outcome",
    "argument_digest",
    "event_matches",
    "format_time",
]

Outcome = Literal["ok", "error", "denied"]
DECISIONS: tuple[Verdict, ...] = ("allow", "deny", "ask-approved", "ask-denied", "budget")
OUTCOMES: tuple[Outcome, ...] = ("ok", "error", "denied")


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """What happened to one call. Never holds arguments or results, only their digest."""

    time: float  # seconds since the epoch, when the call arrived
    session: str
    server: str
    tool: str
    args_digest: str  # "sha256:<hex>" of the canonical JSON of the arguments
    decision: Verdict
    duration_ms: float
    outcome: Outcome
    error_code: str | None = None
    message: str = ""  # short, scrubbed of PII and secrets
    rule: str | None = None  # the policy rule that decided, e.g. "policy.rules[0]"
    count: int = 1  # identical refusals this row stands for (repeats are aggregated)

    @property
    def qualified_name(self) -> str:
        return f"{self.server}.{self.tool}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["time"] = format_time(self.time)
        return data


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Every field narrows the query; ``limit`` keeps the newest matches (None: all)."""

    session: str | None = None
    tool: str | None = None  # a glob over "server.tool"
    since: float | None = None  # epoch seconds, inclusive
    until: float | None = None  # epoch seconds, exclusive
    decision: Verdict | None = None
    outcome: Outcome | None = None
    limit: int | None = 100


def event_matches(event: AuditEvent, filters: AuditFilter) -> bool:
    return (
        (filters.session is None or event.session == filters.session)
        and (filters.tool is None or fnmatchcase(event.qualified_name, filters.tool))
        and (filters.since is None or event.time >= filters.since)
        and (filters.until is None or event.time < filters.until)
        and (filters.decision is None or event.decision == filters.decision)
        and (filters.outcome is None or event.outcome == filters.outcome)
    )


def argument_digest(arguments: Any, *, key: bytes | None = None) -> str:
    """``sha256:<hex>`` of the arguments' canonical JSON (sorted keys, no spaces, UTF-8:
    ``canonical.py``, which writes long strings faster than ``json.dumps`` does).

    With ``key`` it is an HMAC-SHA256 (``hmac-sha256:<hex>``), so that a short guessable value
    (one e-mail address) cannot be recovered from the log by hashing candidates.
    """
    hasher = hmac.new(key, digestmod=hashlib.sha256) if key is not None else hashlib.sha256()
    for piece in canonical_pieces(arguments, _json_fallback):
        hasher.update(piece)
    return ("hmac-sha256:" if key is not None else "sha256:") + hasher.hexdigest()


def _json_fallback(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return {"$bytes": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


def format_time(epoch: float) -> str:
    """ISO 8601 in UTC with milliseconds: ``2026-01-02T03:04:05.678Z``."""
    moment = datetime.fromtimestamp(epoch, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"

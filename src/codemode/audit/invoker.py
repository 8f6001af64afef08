"""``AuditInvoker``: records every tool call, refused ones included, in an ``AuditLog``.

Put it outside ``PolicyInvoker`` so that denials pass through it; it learns the policy's verdict
from ``verdict_scope``. Calls the bridge refuses before any wrapper sees them (a tool not
granted, a late frame) arrive through ``record_refused`` (the bridge's ``on_refused`` hook).

Code cannot flood the log: identical refusals (same tool, decision, code and rule) are written
once, then counted, and one row with the count is written per ``repeat_window_s`` (and when
the session ends, ``flush``); a session writes at most ``events_per_session`` rows, after
which its calls are refused (and counted, in one row at the end) rather than run unaudited.

A failure to write the log is reported through ``logging`` and never turns a call that ran
into an error (its side effect already happened).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from codemode.audit.events import AuditEvent, Outcome, argument_digest
from codemode.audit.log import AuditLog, report_unwritten
from codemode.audit.pending import digest_during_call
from codemode.audit.redaction import MAX_MESSAGE_CHARS, scrub
from codemode.bridge.host import ToolInvoker
from codemode.errors import CodemodeError
from codemode.policy.outcome import BudgetExhaustedError, PolicyRefusedError, Verdict, verdict_scope
from codemode.settings.audit import AuditSettings
from codemode.tools import ToolCall

__all__ = ["AuditInvoker"]


#: Distinct kinds of refusal tracked per session; beyond, they share one counted row.
_MAX_REPEAT_KEYS = 64
_RepeatKey = tuple[str, str, str, str | None, str | None]


@dataclass
class _Repeats:
    first: AuditEvent
    count: int = 0  # repeats since the last row written
    since: float = 0.0  # time of the first of them


class AuditInvoker:
    def __init__(
        self,
        inner: ToolInvoker,
        log: AuditLog,
        session_id: str,
        *,
        digest_key: bytes | None = None,
        clock: Callable[[], float] = time.time,
        settings: AuditSettings | None = None,
    ) -> None:
        self.inner = inner
        self.log = log
        self.session_id = session_id
        self.digest_key = digest_key
        self.clock = clock
        self.settings = settings or AuditSettings()
        self.failed_writes = 0
        self.written = 0
        self._lock = threading.Lock()
        self._repeats: dict[_RepeatKey, _Repeats] = {}
        self._unwritten = 0  # events past the session's budget

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        arrived = self.clock()
        started = time.monotonic()
        outcome: Outcome = "ok"
        code: str | None = None
        message = ""
        refused: Verdict | None = None
        digest = digest_during_call(call.arguments, key=self.digest_key)
        with verdict_scope() as slot:
            try:
                self._check_budget(call)
                return self.inner.invoke(call, timeout_s=timeout_s)
            except PolicyRefusedError as error:
                outcome, code, message, refused = "denied", error.code, error.message, error.verdict
                slot.rule = slot.rule or error.rule
                raise
            except CodemodeError as error:
                outcome, code, message = "error", error.code, error.message
                raise
            except BaseException as error:
                outcome, code, message = "error", "internal_error", type(error).__name__
                raise
            finally:
                verdict = refused or slot.verdict or "allow"
                self._record(
                    AuditEvent(
                        time=arrived,
                        session=self.session_id,
                        server=call.server,
                        tool=call.tool,
                        args_digest=digest(),
                        decision=verdict,
                        duration_ms=round((time.monotonic() - started) * 1000, 3),
                        outcome=outcome,
                        error_code=code,
                        message=scrub(message) if message else "",
                        rule=slot.rule,
                    )
                )

    def record_refused(self, call: ToolCall, code: str, message: str) -> None:
        """A call the bridge refused before any wrapper saw it (not granted, late...)."""
        self._record(
            AuditEvent(
                time=self.clock(),
                session=self.session_id,
                server=call.server[:200],
                tool=call.tool[:200],
                args_digest=argument_digest(call.arguments, key=self.digest_key),
                decision="deny",
                duration_ms=0.0,
                outcome="denied",
                error_code=code,
                message=scrub(message),
                rule=f"bridge.{code}",
            )
        )

    def sync(self) -> None:
        """Return once the events of the calls so far are stored (the execution is ending:
        its result must not go back before them)."""
        self.log.sync()

    def flush(self) -> None:
        """Write the counted repeats and the budget overflow (the session is ending)."""
        with self._lock:
            pending = [self._summary(item) for item in self._repeats.values() if item.count]
            for item in self._repeats.values():
                item.count = 0
            overflow, self._unwritten = self._unwritten, 0
        if overflow:
            pending.append(
                AuditEvent(
                    time=self.clock(),
                    session=self.session_id,
                    server="*",
                    tool="*",
                    args_digest="",
                    decision="budget",
                    duration_ms=0.0,
                    outcome="denied",
                    error_code="audit_budget",
                    message=(
                        f"{overflow} events of this session were not written one by one: its "
                        f"audit budget ({self.settings.events_per_session} rows) was used up "
                        "and every later call was refused"
                    ),
                    rule="audit.events_per_session",
                    count=overflow,
                )
            )
        for event in pending:
            self._append(event)

    def _check_budget(self, call: ToolCall) -> None:
        if self.written < self.settings.events_per_session:
            return
        raise BudgetExhaustedError(
            f"{call.server}.{call.tool} was not run: this session wrote its whole audit budget "
            f"({self.settings.events_per_session} rows). Start a new session, or ask the user "
            "to raise [audit] events_per_session",
            which="audit.events_per_session",
        )

    def _record(self, event: AuditEvent) -> None:
        with self._lock:
            if self.written >= self.settings.events_per_session:
                self._unwritten += event.count
                return
            write = self._aggregate(event) if event.outcome == "denied" else event
            if write is not None:
                self.written += 1
        if write is not None:
            self._append(write)

    def _aggregate(self, event: AuditEvent) -> AuditEvent | None:
        """The row to write for a refusal now, if any (called with the lock held)."""
        key: _RepeatKey = (event.server, event.tool, event.decision, event.error_code, event.rule)
        if key not in self._repeats and len(self._repeats) >= _MAX_REPEAT_KEYS:
            key = ("*", "*", event.decision, event.error_code, "audit.many_refusals")
        repeats = self._repeats.get(key)
        if repeats is None:
            first = event if key[0] != "*" else replace(event, server="*", tool="*", rule=key[4])
            self._repeats[key] = _Repeats(first)
            return first
        if repeats.count == 0:
            repeats.since = event.time
        repeats.count += 1
        if event.time - repeats.since < self.settings.repeat_window_s:
            return None
        summary = self._summary(repeats)
        repeats.count = 0
        return summary

    def _summary(self, repeats: _Repeats) -> AuditEvent:
        first = repeats.first
        return replace(
            first,
            time=repeats.since or first.time,
            duration_ms=0.0,
            count=repeats.count,
            # The message was scrubbed already; the count is ours.
            message=f"repeated {repeats.count} times: {first.message}"[:MAX_MESSAGE_CHARS],
        )

    def _append(self, event: AuditEvent) -> None:
        try:
            self.log.append(event)
        except Exception as error:  # noqa: BLE001 - see the module docstring
            self.failed_writes += 1
            report_unwritten(event, error)

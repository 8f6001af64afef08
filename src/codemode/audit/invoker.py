"""``AuditInvoker``: records every tool call, refused ones included, in an ``AuditLog``.

Put it outside ``PolicyInvoker`` so that denials pass through it; it learns the policy's verdict
from ``verdict_scope``. A failure to write the log is reported through ``logging`` and never
turns a call that ran into an error (its side effect already happened).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from codemode.audit.events import AuditEvent, Outcome, argument_digest
from codemode.audit.log import AuditLog
from codemode.audit.redaction import scrub
from codemode.bridge.host import ToolInvoker
from codemode.errors import CodemodeError
from codemode.policy.outcome import PolicyRefusedError, Verdict, verdict_scope
from codemode.tools import ToolCall

__all__ = ["AuditInvoker"]

log = logging.getLogger(__name__)


class AuditInvoker:
    def __init__(
        self,
        inner: ToolInvoker,
        log: AuditLog,
        session_id: str,
        *,
        digest_key: bytes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.inner = inner
        self.log = log
        self.session_id = session_id
        self.digest_key = digest_key
        self.clock = clock
        self.failed_writes = 0

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        arrived = self.clock()
        started = time.monotonic()
        outcome: Outcome = "ok"
        code: str | None = None
        message = ""
        refused: Verdict | None = None
        with verdict_scope() as slot:
            try:
                return self.inner.invoke(call, timeout_s=timeout_s)
            except PolicyRefusedError as error:
                outcome, code, message, refused = "denied", error.code, error.message, error.verdict
                raise
            except CodemodeError as error:
                outcome, code, message = "error", error.code, error.message
                raise
            except BaseException as error:
                outcome, code, message = "error", "internal_error", type(error).__name__
                raise
            finally:
                verdict = slot.verdict or refused or "allow"
                self._record(
                    AuditEvent(
                        time=arrived,
                        session=self.session_id,
                        server=call.server,
                        tool=call.tool,
                        args_digest=argument_digest(call.arguments, key=self.digest_key),
                        decision=verdict,
                        duration_ms=round((time.monotonic() - started) * 1000, 3),
                        outcome=outcome,
                        error_code=code,
                        message=scrub(message) if message else "",
                        rule=slot.rule,
                    )
                )

    def _record(self, event: AuditEvent) -> None:
        try:
            self.log.append(event)
        except Exception as error:  # noqa: BLE001 - see the module docstring
            self.failed_writes += 1
            log.warning(
                "could not write the audit event for %s.%s: %s",
                event.server,
                event.tool,
                type(error).__name__,
            )

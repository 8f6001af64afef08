"""Approvals: a call that needs a human pauses its execution until someone answers.

The sandbox thread blocks in ``SessionApprover.request``; the engine notices the pending
approval, returns ``approval_required`` to the client, and resumes the same execution when
``answer`` is called. The call runs at most once: it is made only after an approval, by the
thread that was waiting for it.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codemode.errors import SessionError
from codemode.tools import ToolCall

__all__ = ["ApprovalBroker", "PendingApproval", "SessionApprover"]


@dataclass
class PendingApproval:
    id: str
    session: str
    owner: str | None
    call: ToolCall
    reason: str
    created: float = field(default_factory=time.monotonic)
    decision: bool | None = None
    answered: threading.Event = field(default_factory=threading.Event)

    def describe(self) -> dict[str, Any]:
        """What the client sees: the call with its arguments as the code passed them (PII
        still tokenized; long strings shortened so a 200 kB argument stays readable)."""
        return {
            "id": self.id,
            "tool": f"{self.call.server}.{self.call.tool}",
            "arguments": _shorten(self.call.arguments),
            "reason": self.reason,
        }


_SHOWN_CHARS = 160


def _shorten(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str) and len(value) > _SHOWN_CHARS:
        return f"{value[:_SHOWN_CHARS]}... ({len(value):,} characters)"
    if depth > 6:
        return "..."
    if isinstance(value, dict):
        return {key: _shorten(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        shown = [_shorten(item, depth + 1) for item in value[:20]]
        return shown + ([f"... ({len(value)} items)"] if len(value) > 20 else [])
    return value


class ApprovalBroker:
    """All pending approvals of an engine. Thread-safe."""

    def __init__(self, *, wait_limit_s: float = 900.0) -> None:
        self.wait_limit_s = wait_limit_s
        self._pending: dict[str, PendingApproval] = {}
        self._lock = threading.Lock()
        self._listeners: dict[str, Callable[[PendingApproval], None]] = {}

    def listen(self, session: str, callback: Callable[[PendingApproval], None]) -> None:
        """``callback`` runs (on the sandbox thread) when ``session`` starts waiting."""
        with self._lock:
            self._listeners[session] = callback

    def unlisten(self, session: str) -> None:
        with self._lock:
            self._listeners.pop(session, None)

    def pending_for(self, session: str) -> PendingApproval | None:
        with self._lock:
            for pending in self._pending.values():
                if pending.session == session and pending.decision is None:
                    return pending
        return None

    def wait(self, session: str, owner: str | None, call: ToolCall, reason: str) -> bool:
        pending = PendingApproval("ap_" + secrets.token_urlsafe(12), session, owner, call, reason)
        with self._lock:
            self._pending[pending.id] = pending
            listener = self._listeners.get(session)
        if listener is not None:
            listener(pending)
        try:
            # The wait is not counted against the execution: the policy wrapper that asked
            # pauses the execution's clock around the whole request (pausing here too would
            # count it twice).
            answered = pending.answered.wait(self.wait_limit_s)
            return answered and bool(pending.decision)
        finally:
            with self._lock:
                self._pending.pop(pending.id, None)

    def answer(self, approval_id: str, approve: bool, owner: str | None) -> PendingApproval:
        with self._lock:
            pending = self._pending.get(approval_id)
            if pending is None or (pending.owner is not None and pending.owner != owner):
                raise SessionError(
                    f"no pending approval {approval_id[:16]!r}",
                    fix="use the approval id from the latest approval_required result",
                )
            if pending.decision is not None:
                raise SessionError(f"approval {approval_id[:16]!r} was already answered")
            pending.decision = approve
        pending.answered.set()
        return pending

    def cancel_session(self, session: str) -> None:
        """Deny everything a closing session waits for, so its thread can finish."""
        with self._lock:
            waiting = [p for p in self._pending.values() if p.session == session]
        for pending in waiting:
            if pending.decision is None:
                pending.decision = False
                pending.answered.set()


class SessionApprover:
    """The ``Approver`` the policy wrapper of one session calls."""

    def __init__(self, broker: ApprovalBroker, session: str, owner: str | None) -> None:
        self.broker = broker
        self.session = session
        self.owner = owner

    def request(self, call: ToolCall, *, reason: str) -> bool:
        return self.broker.wait(self.session, self.owner, call, reason)

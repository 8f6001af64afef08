"""Approvals: a call that needs a human pauses its execution until someone answers.

The sandbox thread blocks in ``SessionApprover.request``; the engine notices the pending
approval, returns ``approval_required`` to the client, and resumes the same execution when
``answer`` is called. The call runs at most once: it is made only after an approval, by the
thread that was waiting for it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codemode.errors import ApprovalMismatchError, SessionError
from codemode.tools import ToolCall

__all__ = [
    "PAGE_CHARS",
    "ApprovalBroker",
    "PendingApproval",
    "SessionApprover",
    "canonical_json",
    "text_digest",
]


View = Callable[[Any], Any]


def _as_shown(value: Any) -> Any:
    return value


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
    # How arguments are shown (the session's privacy scan) and the digest of what was shown.
    view: View = _as_shown
    shown_digest: str | None = None

    def describe(self, view: View | None = None) -> dict[str, Any]:
        """What the client sees: the tool, its full arguments as the code passed them (PII
        still tokenized, nothing shortened) and their digest. When the arguments' JSON is
        longer than a page, ``pages`` holds it cut into pages, so nothing needs to be hidden
        however it is displayed. ``approve`` may quote the digest: it must still match."""
        if view is not None:
            self.view = view
        shown = self.view(self.call.arguments)
        text = canonical_json(shown)
        self.shown_digest = text_digest(text)
        described: dict[str, Any] = {
            "id": self.id,
            "tool": f"{self.call.server}.{self.call.tool}",
            "arguments": shown,
            "digest": self.shown_digest,
            "chars": len(text),
            "reason": self.reason,
        }
        if len(text) > PAGE_CHARS:
            described["pages"] = [
                text[start : start + PAGE_CHARS] for start in range(0, len(text), PAGE_CHARS)
            ]
        return described

    def check(self, digest: str | None) -> None:
        """Before an approval counts: what would run is exactly what was shown (an approval
        never described, by a program holding the broker, is checked against ``digest``)."""
        current = text_digest(canonical_json(self.view(self.call.arguments)))
        if self.shown_digest is None:
            self.shown_digest = current
        elif current != self.shown_digest:
            raise ApprovalMismatchError(
                f"approval {self.id[:16]!r}: the call's arguments are not the ones shown "
                "(their digest changed), so it was not approved",
                fix="show the user the latest approval_required result and approve that one",
            )
        if digest is not None and digest != self.shown_digest:
            raise ApprovalMismatchError(
                f"approval {self.id[:16]!r}: digest {digest[:23]!r} is not the digest of the "
                f"arguments shown ({self.shown_digest[:23]}...), so it was not approved",
                fix="approve with the digest from the approval_required result, or none",
            )


#: Arguments whose JSON is longer than this are also given as pages of this size.
PAGE_CHARS = 4000


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, non-ASCII kept: the text the digest is taken over."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )


def text_digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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

    def answer(
        self, approval_id: str, approve: bool, owner: str | None, *, digest: str | None = None
    ) -> PendingApproval:
        """Record the decision. An approval (not a denial) first checks that the call is still
        the one shown, and ``digest`` if given: on a mismatch nothing is recorded."""
        with self._lock:
            pending = self._pending.get(approval_id)
            if pending is None or (pending.owner is not None and pending.owner != owner):
                raise SessionError(
                    f"no pending approval {approval_id[:16]!r}",
                    fix="use the approval id from the latest approval_required result",
                )
            if pending.decision is not None:
                raise SessionError(f"approval {approval_id[:16]!r} was already answered")
            if approve:
                pending.check(digest)
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

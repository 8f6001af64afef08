"""Approvals: a call that needs a human pauses its execution until someone answers.

The sandbox thread blocks in ``SessionApprovalGate.request``; the engine notices the pending
approval, returns ``approval_required`` to the client, and resumes the same execution when
``answer`` is called. The call runs at most once: it is made only after an approval, by the
thread that was waiting for it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from codemode.errors import ApprovalMismatchError, SessionError, UsageError
from codemode.policy.approval import ApprovalRequest, ValuesSent
from codemode.policy.flowgate import FlowAsk
from codemode.policy.grants import REMEMBER_CHOICES, ApprovalAnswer, Remember
from codemode.tools import ToolCall

__all__ = [
    "INLINE_CHARS",
    "ApprovalBroker",
    "PendingApproval",
    "SessionApprovalGate",
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
    # Long arguments written out for the approver (deleted when the approval is over).
    spilled: Path | None = None
    # Told each time the approval is shown (a shared broker records it for other replicas).
    on_described: Callable[[PendingApproval], None] | None = None
    # Hidden values the call would send to a tool that may reach the outside world.
    flows: FlowAsk | None = None
    # How long an approval holds (``approve(..., remember=...)``).
    remember: Remember = "call"

    def describe(
        self, view: View | None = None, *, spill_dir: Path | None = None
    ) -> ApprovalRequest:
        """What the client sees: the tool, the arguments as the code passed them (PII still
        tokenized), their digest (SHA-256 of the canonical JSON) and size. Arguments whose
        JSON is longer than ``INLINE_CHARS`` are written whole to a file in ``spill_dir``
        (named by ``file``; its SHA-256 is the digest) and shown shortened; without a
        ``spill_dir`` they are shown whole, and also cut into ``pages``. ``approve`` may
        quote the digest: it must still match."""
        if view is not None:
            self.view = view
        shown = self.view(self.call.arguments)
        text = canonical_json(shown)
        self.shown_digest = text_digest(text)
        tool = f"{self.call.server}.{self.call.tool}"
        # Tokens only: the values themselves never reach the client.
        flows = self.flows.values if self.flows is not None else None
        values = None if flows is None else ValuesSent(tool, {k: list(v) for k, v in flows.items()})
        described = ApprovalRequest(
            self.id, tool, shown, self.reason, self.shown_digest, len(text), values
        )
        if self.on_described is not None:
            self.on_described(self)
        if len(text) <= INLINE_CHARS:
            return described
        if spill_dir is not None:
            self.spilled = _spill(spill_dir, self.id, text)
            return replace(described, arguments=_preview(shown), file=str(self.spilled))
        pages = [text[start : start + INLINE_CHARS] for start in range(0, len(text), INLINE_CHARS)]
        return replace(described, pages=pages)

    def discard(self) -> None:
        """The approval is over: remove the file its arguments were written to."""
        if self.spilled is not None:
            with contextlib.suppress(OSError):
                self.spilled.unlink()
            self.spilled = None

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


#: Arguments whose JSON is longer than this go to a file (or pages) instead of inline.
INLINE_CHARS = 4000
_PREVIEW_CHARS = 160


def _spill(directory: Path, approval_id: str, text: str) -> Path:
    from codemode.storage.private import private_dir

    private_dir(directory)  # tightened if an older version left it readable
    path = directory / f"{approval_id}.json"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
    descriptor = os.open(path, flags, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def _preview(value: Any, depth: int = 0) -> Any:
    """``value`` with long strings and lists cut, each cut saying where the rest is."""
    if isinstance(value, str) and len(value) > _PREVIEW_CHARS:
        return f"{value[:_PREVIEW_CHARS]}... ({len(value):,} characters: all in 'file')"
    if depth > 6:
        return "... (all in 'file')"
    if isinstance(value, dict):
        return {key: _preview(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        shown = [_preview(item, depth + 1) for item in value[:20]]
        return shown + ([f"... ({len(value)} items: all in 'file')"] if len(value) > 20 else [])
    return value


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
        return self.wait_answer(session, owner, call, reason).allow

    def wait_answer(
        self,
        session: str,
        owner: str | None,
        call: ToolCall,
        reason: str,
        flows: FlowAsk | None = None,
    ) -> ApprovalAnswer:
        pending = PendingApproval("ap_" + secrets.token_urlsafe(12), session, owner, call, reason)
        pending.flows = flows
        self._created(pending)
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
            allow = answered and bool(pending.decision)
            return ApprovalAnswer(allow, pending.remember if allow else "call")
        finally:
            with self._lock:
                self._pending.pop(pending.id, None)
            pending.discard()
            self._finished(pending)

    def _created(self, pending: PendingApproval) -> None:
        """A new approval starts waiting (before anyone is told); a hook for subclasses."""

    def _finished(self, pending: PendingApproval) -> None:
        """The approval's wait ended (answered, timed out or cancelled); a hook."""

    def answer(
        self,
        approval_id: str,
        approve: bool,
        owner: str | None,
        *,
        digest: str | None = None,
        remember: str = "call",
    ) -> PendingApproval:
        """Record the decision. An approval (not a denial) first checks that the call is still
        the one shown, and ``digest`` if given: on a mismatch nothing is recorded.
        ``remember`` ("call", "tool" or "server") says how long an approval holds."""
        if remember not in REMEMBER_CHOICES:
            raise UsageError(
                f"remember={remember!r} is not one of {', '.join(REMEMBER_CHOICES)}",
                fix='pass remember="call" (this call), "tool" (this tool, this session) or '
                '"server" (this server\'s calls of the same kind, this session)',
            )
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
                pending.remember = remember
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


class SessionApprovalGate:
    """The ``ApprovalGate`` the policy wrapper of one session calls: the engine's broker."""

    def __init__(self, broker: ApprovalBroker, session: str, owner: str | None) -> None:
        self.broker = broker
        self.session = session
        self.owner = owner

    def request(self, call: ToolCall, *, reason: str) -> bool:
        return self.broker.wait(self.session, self.owner, call, reason)

    def ask(self, call: ToolCall, *, reason: str, flows: FlowAsk | None) -> ApprovalAnswer:
        return self.broker.wait_answer(self.session, self.owner, call, reason, flows)

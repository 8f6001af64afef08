"""Approvals every replica can answer, decided exactly once.

A pending approval is recorded as ``approval:{id}`` (session, owner, the replica that holds
the paused execution, the digest of the arguments shown, and its state) as soon as it is
shown. ``decide`` moves it from ``pending`` to ``allowed`` or ``denied`` in one Lua script:
whichever replica gets there first decides; every later answer, on any replica, is told it was
already decided. The record outlives the decision (for that answer) and then expires.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from codemode.engine.approvals import ApprovalBroker, PendingApproval
from codemode.errors import (
    ApprovalDecidedError,
    ApprovalMismatchError,
    SessionError,
    StateStoreError,
)
from codemode.replicas.connection import SharedRedis
from codemode.replicas.directory import owner_tag

__all__ = ["ApprovalRecords", "Decision", "SharedApprovalBroker"]

log = logging.getLogger(__name__)

_DECIDE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing', '', ''} end
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return {'missing', '', ''} end
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'pending' then return {'decided', state, ''} end
if ARGV[2] == 'allowed' and ARGV[3] ~= '' and redis.call('HGET', KEYS[1], 'digest') ~= ARGV[3]
then return {'digest', redis.call('HGET', KEYS[1], 'digest'), ''} end
redis.call('HSET', KEYS[1], 'state', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'ok', redis.call('HGET', KEYS[1], 'replica'), redis.call('HGET', KEYS[1], 'session')}
"""

_MOVE = """
if redis.call('HGET', KEYS[1], 'state') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'state', ARGV[2])
  return 1
end
return 0
"""


@dataclass(frozen=True)
class Decision:
    """The recorded answer: ``replica`` holds the paused execution of ``session``."""

    replica: str
    session: str


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class ApprovalRecords:
    """The shared records of approvals (see the module doc)."""

    def __init__(self, redis: SharedRedis, replica: str, *, keep_s: float = 3600.0) -> None:
        self.redis = redis
        self.replica = replica
        self.keep_ms = int(keep_s * 1000)
        self._decide = redis.script(_DECIDE)
        self._move = redis.script(_MOVE)

    def key(self, approval_id: str) -> str:
        return self.redis.key("approval", approval_id)

    def record(self, pending: PendingApproval) -> None:
        """``pending`` is shown to a client: any replica may answer it from now on."""
        fields = {
            "session": pending.session,
            "owner": owner_tag(pending.owner),
            "replica": self.replica,
            "digest": pending.shown_digest or "",
        }
        pipe = self.redis.client.pipeline(transaction=True)
        pipe.hset(self.key(pending.id), mapping=fields)
        pipe.hsetnx(self.key(pending.id), "state", "pending")
        pipe.pexpire(self.key(pending.id), self.keep_ms)
        self.redis.call(pipe.execute)

    def decide(
        self, approval_id: str, allow: bool, owner: str | None, digest: str | None
    ) -> Decision:
        state = "allowed" if allow else "denied"
        outcome, first, second = self._decide(
            keys=[self.key(approval_id)],
            args=[owner_tag(owner), state, digest or "", self.keep_ms],
        )
        status: Literal["ok", "missing", "decided", "digest"] = _text(outcome)  # type: ignore[assignment]
        if status == "missing":
            raise SessionError(
                f"no pending approval {approval_id[:16]!r}",
                fix="use the approval id from the latest approval_required result",
            )
        if status == "decided" and _text(first) == "expired":
            raise SessionError(
                f"approval {approval_id[:16]!r} is no longer pending: its execution ended "
                "(the wait timed out, the call was cancelled or the session closed)",
                fix="run the code again in the session to ask anew",
            )
        if status == "decided":
            raise ApprovalDecidedError(
                f"approval {approval_id[:16]!r} was already decided ({_text(first)}); "
                "this answer changed nothing and the call was not run again",
                fix="nothing to do; run new code in the session to go on",
            )
        if status == "digest":
            raise ApprovalMismatchError(
                f"approval {approval_id[:16]!r}: digest {(digest or '')[:23]!r} is not the "
                f"digest of the arguments shown ({_text(first)[:23]}...), so it was not approved",
                fix="approve with the digest from the approval_required result, or none",
            )
        return Decision(_text(first), _text(second))

    def undo(self, approval_id: str, allow: bool) -> None:
        """The holder refused the decision (the arguments changed): pending again."""
        self._move(keys=[self.key(approval_id)], args=["allowed" if allow else "denied", "pending"])

    def lapse(self, approval_id: str) -> None:
        """The wait ended without a decision (timed out, cancelled, session closed)."""
        self._move(keys=[self.key(approval_id)], args=["pending", "expired"])


class SharedApprovalBroker(ApprovalBroker):
    """The engine's broker, recording each approval it shows in ``records``."""

    def __init__(self, records: ApprovalRecords, *, wait_limit_s: float = 900.0) -> None:
        super().__init__(wait_limit_s=wait_limit_s)
        self.records = records

    def _created(self, pending: PendingApproval) -> None:
        pending.on_described = self.records.record

    def _finished(self, pending: PendingApproval) -> None:
        if pending.decision is None or pending.decision is False:
            # Denied locally by a closing session, or never answered: no one may approve it.
            try:
                self.records.lapse(pending.id)
            except StateStoreError:  # the record expires by itself; the wait is over anyway
                log.warning("could not mark approval %s as lapsed", pending.id, exc_info=True)

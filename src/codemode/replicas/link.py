"""What a replica does for the others: heartbeat, lease renewal, and paused executions
resumed on behalf of an approval answered elsewhere.

Replica B answers approval X (held by replica A): B records the decision (exactly once, see
``approvals``), pushes it on A's queue ``replica:{A}:decisions`` and waits on
``approval:{X}:result``. A's listener resumes the paused execution (the call runs there, once),
and pushes the result (or its next pause, or an error) back; B returns it. B's wait ends early
with ``ReplicaLostError`` when A's heartbeat stops. The result (the execution's output) is
sealed by the store's ``Sealer``, bound to its key; the decision itself (id, allow, owner) is
not secret and is not.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from codemode.errors import (
    ApprovalMismatchError,
    CodemodeError,
    ReplicaLostError,
    SessionBusyError,
    SessionError,
    StateStoreError,
    UnknownSessionError,
)
from codemode.replicas.approvals import ApprovalRecords
from codemode.replicas.connection import SharedRedis
from codemode.replicas.directory import SessionDirectory
from codemode.replicas.sealing import PlainSealer, Sealer
from codemode.replicas.wire import result_from_json, result_to_json
from codemode.sandbox.result import ExecutionResult

if TYPE_CHECKING:
    from codemode.engine.progress import Progress
    from codemode.engine.sharing import SharingMixin
    from codemode.replicas.registry import SharedSessionRegistry

__all__ = ["ReplicaLink"]

log = logging.getLogger(__name__)
_POLL_S = 1
# Errors of the holding replica, raised again here as what they were.
_ERRORS: dict[str, type[SessionError]] = {
    cls.code: cls for cls in (ApprovalMismatchError, UnknownSessionError, SessionBusyError)
}


class ReplicaLink:
    def __init__(
        self,
        engine: SharingMixin,
        redis: SharedRedis,
        directory: SessionDirectory,
        records: ApprovalRecords,
        registry: SharedSessionRegistry,
        *,
        lease_s: float,
        wait_limit_s: float,
        sealer: Sealer | None = None,
    ) -> None:
        self.engine = engine
        self.sealer = sealer or PlainSealer()
        self.redis = redis
        self.directory = directory
        self.records = records
        self.registry = registry
        self.lease_s = lease_s
        self.wait_limit_s = wait_limit_s
        self.replica = directory.replica
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def _queue(self, replica: str) -> str:
        return self.redis.key("replica", replica, "decisions")

    def _result_key(self, approval_id: str) -> str:
        return self.redis.key("approval", approval_id, "result")

    # --- life cycle ---------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.directory.beat(self.lease_s)
        for target, name in ((self._beat_loop, "beat"), (self._listen_loop, "listen")):
            thread = threading.Thread(target=target, name=f"codemode-replica-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=_POLL_S + 5)
        try:  # others learn at once that this replica is gone (else when its beat expires)
            self.redis.call(self.redis.client.delete, self.redis.key("replica", self.replica))
        except StateStoreError:
            log.warning("could not remove this replica's heartbeat", exc_info=True)

    def _beat_loop(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                self.directory.beat(self.lease_s)
                leased = self.registry.leased()
                lost = self.directory.renew(leased, self.registry.clients(leased))
                for handle in lost:
                    log.warning("lost the lease of session %s (the store was unreachable?)", handle)
            except Exception:
                log.warning("could not renew this replica's heartbeat and leases", exc_info=True)

    # --- approvals answered elsewhere, for executions held here ---------------------------

    def _listen_loop(self) -> None:
        client = self.redis.client
        while not self._stop.is_set():
            try:
                item = client.blpop([self._queue(self.replica)], timeout=_POLL_S)
            except Exception:
                log.warning("could not read this replica's decisions", exc_info=True)
                self._stop.wait(_POLL_S)
                continue
            if item is None or self._loop is None:
                continue
            message = json.loads(item[1])
            asyncio.run_coroutine_threadsafe(self._resume_for(message), self._loop)

    async def _resume_for(self, message: dict[str, Any]) -> None:
        approval_id = str(message["id"])
        try:
            result = await self.engine.resume_approved(
                approval_id,
                bool(message["allow"]),
                owner=message.get("owner"),
                digest=None,
                remember=str(message.get("remember", "call")),
            )
            payload = result_to_json(result)
        except ApprovalMismatchError as error:
            self.records.undo(approval_id, bool(message["allow"]))
            payload = json.dumps({"error": str(error), "code": error.code}).encode()
        except CodemodeError as error:
            payload = json.dumps({"error": str(error), "code": error.code}).encode()
        except Exception as error:
            log.exception("resuming approval %s failed", approval_id)
            payload = json.dumps({"error": f"resuming failed: {error}", "code": "error"}).encode()
        key = self._result_key(approval_id)
        pipe = self.redis.client.pipeline(transaction=True)
        pipe.rpush(key, self.sealer.seal(payload, bound_to=key))
        pipe.pexpire(key, int(self.wait_limit_s * 1000))
        try:
            await anyio.to_thread.run_sync(self.redis.call, pipe.execute)
        except StateStoreError:  # the approving replica's wait then ends on its bound
            log.warning("could not publish the result of approval %s", approval_id, exc_info=True)

    # --- approve, on any replica ----------------------------------------------------------

    async def approve(
        self,
        approval_id: str,
        allow: bool,
        *,
        owner: str | None,
        digest: str | None,
        progress: Progress | None = None,
        remember: str = "call",
    ) -> ExecutionResult:
        decision = await anyio.to_thread.run_sync(
            self.records.decide, approval_id, allow, owner, digest
        )
        if decision.replica == self.replica:
            try:
                return await self.engine.resume_approved(
                    approval_id,
                    allow,
                    owner=owner,
                    digest=digest,
                    progress=progress,
                    remember=remember,
                )
            except ApprovalMismatchError:
                self.records.undo(approval_id, allow)
                raise
        if not self.directory.alive(decision.replica):
            raise self._lost(approval_id)
        message = {"id": approval_id, "allow": allow, "owner": owner, "remember": remember}
        await anyio.to_thread.run_sync(
            self.redis.call,
            self.redis.client.rpush,
            self._queue(decision.replica),
            json.dumps(message),
        )
        # A caller that goes away stops waiting; the thread's wait ends on its own bound.
        return await anyio.to_thread.run_sync(
            self._wait_result, approval_id, decision.replica, abandon_on_cancel=True
        )

    def _wait_result(self, approval_id: str, replica: str) -> ExecutionResult:
        deadline = time.monotonic() + self.wait_limit_s
        key = self._result_key(approval_id)
        while time.monotonic() < deadline and not self._stop.is_set():
            item = self.redis.call(self.redis.client.blpop, [key], timeout=_POLL_S)
            if item is not None:
                data = json.loads(self.sealer.open(bytes(item[1]), bound_to=key))
                if "result" in data:
                    return result_from_json(data["result"])
                error = _ERRORS.get(str(data.get("code")), SessionError)
                raise error(str(data.get("error", "resuming failed")))
            if not self.directory.alive(replica):
                raise self._lost(approval_id)
        raise SessionError(
            f"approval {approval_id[:16]!r} was recorded, but its execution did not report "
            f"within {self.wait_limit_s:.0f} s",
            fix="run new code in the session later to see where it stands",
        )

    def _lost(self, approval_id: str) -> ReplicaLostError:
        return ReplicaLostError(
            f"approval {approval_id[:16]!r} was recorded, but the replica running its "
            "execution stopped, so the call did not run",
            fix="run the code again in the same session: it continues from its checkpoint "
            "on this replica",
        )

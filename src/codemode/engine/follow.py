"""Following one execution from the engine: until it finishes or pauses for an approval,
reporting progress meanwhile, and stopping it when its caller goes away."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from codemode.config.model import GatewaySettings
from codemode.engine.approvals import ApprovalBroker, PendingApproval
from codemode.engine.progress import Progress, cancel_report, first_done, wait_reporting
from codemode.engine.registry import SessionRegistry
from codemode.engine.session import Session
from codemode.errors import SessionError
from codemode.policy.approval import ApprovalDecision
from codemode.sandbox.result import ExecutionResult

__all__ = ["Follower"]


class Follower:
    """Follows the executions of one engine's sessions (its registry and approval broker)."""

    def __init__(
        self,
        registry: SessionRegistry,
        approvals: ApprovalBroker,
        gateway: GatewaySettings,
        finished: Callable[[str | None, ExecutionResult], None] = lambda owner, result: None,
    ) -> None:
        """``finished(owner, result)``: told of every execution that ran to its end."""
        self.registry = registry
        self.approvals = approvals
        self.gateway = gateway
        self.finished = finished

    async def follow(
        self,
        record: Session,
        job: asyncio.Future[ExecutionResult],
        progress: Progress | None = None,
    ) -> ExecutionResult:
        """Wait until the execution finishes or pauses for an approval, whichever is first,
        reporting progress meanwhile."""
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        attention: asyncio.Future[PendingApproval] = loop.create_future()

        def settle(pending: PendingApproval) -> None:
            if not attention.done():
                attention.set_result(pending)

        def notice(pending: PendingApproval) -> None:
            loop.call_soon_threadsafe(settle, pending)

        cancel = record.cancel_event  # this execution's: a later one on the session has its own
        self.approvals.listen(record.handle, notice)
        already = self.approvals.pending_for(record.handle)
        if already is not None:
            notice(already)

        def describe(elapsed: float) -> tuple[float, float | None, str]:
            calls, printed = record.live_counts()
            return (
                round(elapsed, 3),
                None,
                f"running {elapsed:.0f} s: {calls} tool call(s), {printed} bytes printed",
            )

        try:
            waiting: list[asyncio.Future[Any]] = [job, attention]
            if progress is None:  # nothing to report: the first to finish is all
                await first_done(waiting, None)
            else:
                await wait_reporting(waiting, progress, self.gateway.progress_interval_s, describe)
        except asyncio.CancelledError:
            # The caller cancelled or went away: stop the code (no tool call starts after
            # this), release the session when it has stopped, and keep its result for the
            # next execution to report.
            self.abandon(record, job, cancel)
            raise
        finally:
            self.approvals.unlisten(record.handle)
        if not job.done():
            paused = record.approval_result(
                attention.result(),
                round((time.monotonic() - started) * 1000, 3),
                spill_dir=self.gateway.state_dir / "approvals",
            )
            assert paused.approval is not None  # approval_result always carries it
            record.pause(job, paused.approval)
            return paused
        record.complete()
        self.registry.release(record)
        result = record.finish(job.result())
        self.finished(record.owner, result)
        earlier = record.take_cancelled()
        if earlier is None:
            return result
        hint = f"The previous execution was cancelled: {earlier.hint} {result.hint}".strip()
        return replace(result, cancelled_before=cancel_report(earlier), hint=hint)

    async def resume(
        self, decision: ApprovalDecision, progress: Progress | None = None
    ) -> ExecutionResult:
        """Answer an approval pending in this engine and follow the execution it resumes."""
        pending = self.approvals.answer(
            decision.approval_id,
            decision.allow,
            decision.decided_by,
            digest=decision.digest,
            remember=decision.remember,
        )
        record = self.registry.get(pending.session, decision.decided_by)
        if record.paused is None:
            raise SessionError("that execution is no longer running")
        job = record.resume(decision)
        return await self.follow(record, job, progress)

    def abandon(
        self,
        record: Session,
        job: asyncio.Future[ExecutionResult],
        cancel: threading.Event | None = None,
    ) -> None:
        record.cancel(cancel)  # no tool call starts after this
        # A call waiting for a human is refused: its thread must not wait for an answer.
        self.approvals.cancel_session(record.handle)
        registry = self.registry

        def stopped(done: asyncio.Future[ExecutionResult]) -> None:
            registry.release(record)
            ok = not done.cancelled() and done.exception() is None
            record.stopped(record.finish(done.result()) if ok else None)

        job.add_done_callback(stopped)

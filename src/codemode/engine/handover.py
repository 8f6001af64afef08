"""What the engine hands to the shared (replicas) implementation of its parts, typed here so
``codemode.replicas`` depends on the engine and never the other way round."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from codemode.engine.progress import Progress
    from codemode.sandbox.result import ExecutionResult

__all__ = ["Handover", "ResumeApproved"]


class Handover(Protocol):
    """What a replica does with a session another replica ran last."""

    def restore_needed(self, handle: str, previous: str) -> bool:
        """A session last run by replica ``previous`` continues here: True to rebuild its
        sandbox from the checkpoint, False when the provider reattaches the same sandbox."""
        ...


class ResumeApproved(Protocol):
    """Answer an approval pending in this engine and follow the execution it resumes
    (``Codemode.resume_approved``)."""

    async def __call__(
        self,
        approval_id: str,
        allow: bool,
        *,
        owner: str | None = None,
        digest: str | None = None,
        progress: Progress | None = None,
    ) -> ExecutionResult: ...

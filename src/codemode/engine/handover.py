"""What the engine hands to the shared (replicas) implementation of its parts, typed here so
``codemode.replicas`` depends on the engine and never the other way round."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from codemode.engine.progress import Progress
    from codemode.sandbox.result import ExecutionResult
    from codemode.state.store import KeyValueStore

__all__ = ["ApproveAnywhere", "Handover", "ResumeApproved", "SharedStore"]


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
        remember: str = "call",
    ) -> ExecutionResult: ...


class ApproveAnywhere(Protocol):
    """Answers an approval held by any replica: decided once, resumed where it is paused."""

    async def approve(
        self,
        approval_id: str,
        allow: bool,
        *,
        owner: str | None,
        digest: str | None,
        progress: Progress | None = None,
        remember: str = "call",
    ) -> ExecutionResult: ...


class SharedStore(Protocol):
    """What the engine and the gateway use of the store replicas share
    (``codemode.replicas.attach.SharedState``)."""

    @property
    def link(self) -> ApproveAnywhere: ...

    @property
    def checkpoints(self) -> KeyValueStore:
        """Where session checkpoints live, for every replica."""
        ...

    def close(self) -> None: ...

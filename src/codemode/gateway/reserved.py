"""Approvals being asked of a person, which the ``approve`` tool must refuse: known to this
process, and to every replica when they share a store (a model's ``approve`` may reach any)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio.to_thread

if TYPE_CHECKING:
    from codemode.engine import Codemode

__all__ = ["Reservations"]


class Reservations:
    """Marks kept in this process and, with replicas, in the shared store (under
    ``approval-asked:<id>``, beside the checkpoints every replica reads)."""

    def __init__(self, engine: Codemode) -> None:
        self.engine = engine
        self._local: set[str] = set()

    async def add(self, approval_id: str) -> None:
        self._local.add(approval_id)
        shared = self.engine.shared
        if shared is not None:
            # Outlives the approval's own wait, after which nobody can answer it anyway.
            expires = time.time() + self.engine.approvals.wait_limit_s + 60
            store = shared.checkpoints
            await anyio.to_thread.run_sync(
                lambda: store.set(_key(approval_id), b"1", expires_at=expires)
            )

    async def discard(self, approval_id: str) -> None:
        self._local.discard(approval_id)
        shared = self.engine.shared
        if shared is not None:
            store = shared.checkpoints
            await anyio.to_thread.run_sync(lambda: store.delete(_key(approval_id)))

    async def holds(self, approval_id: str) -> bool:
        if approval_id in self._local:
            return True
        shared = self.engine.shared
        if shared is None:
            return False
        store = shared.checkpoints
        found = await anyio.to_thread.run_sync(lambda: store.get(_key(approval_id)))
        return found is not None


def _key(approval_id: str) -> str:
    return f"approval-asked:{approval_id}"

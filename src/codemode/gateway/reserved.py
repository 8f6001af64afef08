"""Approvals being asked of a person, which the ``approve`` tool must refuse: known to this
process, and to every replica when they share a store (a model's ``approve`` may reach any)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio.to_thread

if TYPE_CHECKING:
    from codemode.engine import Codemode

__all__ = ["Reservations"]


class Reservations:
    def __init__(self, engine: Codemode) -> None:
        self.engine = engine
        self._local: set[str] = set()

    def _key(self, approval_id: str) -> str | None:
        shared = self.engine.shared
        return shared.redis.key("approval-asked", approval_id) if shared is not None else None

    async def add(self, approval_id: str) -> None:
        self._local.add(approval_id)
        key, shared = self._key(approval_id), self.engine.shared
        if key is not None and shared is not None:
            # Outlives the approval's own wait, after which nobody can answer it anyway.
            ttl = int(self.engine.approvals.wait_limit_s) + 60
            client = shared.redis.client
            await anyio.to_thread.run_sync(lambda: shared.redis.call(client.set, key, 1, ex=ttl))

    async def discard(self, approval_id: str) -> None:
        self._local.discard(approval_id)
        key, shared = self._key(approval_id), self.engine.shared
        if key is not None and shared is not None:
            client = shared.redis.client
            await anyio.to_thread.run_sync(lambda: shared.redis.call(client.delete, key))

    async def holds(self, approval_id: str) -> bool:
        if approval_id in self._local:
            return True
        key, shared = self._key(approval_id), self.engine.shared
        if key is None or shared is None:
            return False
        client = shared.redis.client
        found = await anyio.to_thread.run_sync(lambda: shared.redis.call(client.exists, key))
        return bool(found)

"""Where an engine's sandboxes come from: a Ray cluster when one is configured, else a warm
pool of local sandboxes."""

from __future__ import annotations

import anyio

from codemode.config import CodemodeConfig
from codemode.sandbox.backends import SandboxBackend, make_backend
from codemode.sandbox.pool import SandboxPool
from codemode.sandbox.provider import PooledSandboxes, SandboxProvider

__all__ = ["open_sandboxes"]


async def open_sandboxes(
    config: CodemodeConfig, backend: SandboxBackend | None
) -> tuple[SandboxProvider, SandboxBackend | None]:
    """The provider, and the local backend behind it (None on a cluster). A backend given by
    the caller always means local sandboxes."""
    if backend is None and config.cluster.address:
        from codemode.cluster.provider import RaySandboxes  # Ray only when configured

        cluster: SandboxProvider = await anyio.to_thread.run_sync(
            RaySandboxes, config.cluster, config.sandbox
        )
        return cluster, None
    backend = backend or make_backend(config.sandbox)
    # Started on the event loop's own thread, not a worker thread that may end: the pool's
    # starter threads are long-lived, and a sandbox dies with the thread that started it.
    pool = SandboxPool.from_settings(backend, config.sandbox).start()
    return PooledSandboxes(pool), backend

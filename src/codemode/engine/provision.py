"""What an engine opens when it starts besides its shared parts: its sandboxes (a Ray cluster
when one is configured, else a warm pool of local sandboxes) and its saved skills."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from codemode.bridge.host import ToolAccess
from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.engine.chain import build_invoker_chain
from codemode.engine.invoker import CatalogInvoker
from codemode.engine.parts import SessionParts
from codemode.sandbox.backends import SandboxBackend, make_backend
from codemode.sandbox.pool import SandboxPool
from codemode.sandbox.provider import PooledSandboxes, SandboxProvider

if TYPE_CHECKING:
    from codemode.bridge.host import ToolInvoker
    from codemode.skills.runtime import SkillsRuntime
    from codemode.state.tiered import TieredStore
    from codemode.tools import ToolSpec

__all__ = ["open_sandboxes", "open_skills"]


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
    owned = backend is None
    backend = backend or make_backend(config.sandbox)
    # Started on the event loop's own thread, not a worker thread that may end: the pool's
    # starter threads are long-lived, and a sandbox dies with the thread that started it.
    idle_after_s = config.gateway.idle_release_s or None
    pool = SandboxPool.from_settings(backend, config.sandbox, idle_after_s=idle_after_s).start()
    return PooledSandboxes(pool, owns_backend=owned), backend


def open_skills(
    config: CodemodeConfig,
    catalog: Catalog,
    parts: SessionParts,
    invoker: CatalogInvoker,
    sandboxes: SandboxProvider,
    state_store: TieredStore,
    access: Callable[[ToolInvoker], ToolAccess],
    specs: Callable[[str, str], ToolSpec | None],
) -> SkillsRuntime:
    """Saved skills and session checkpoints (in the shared store when there is one); a
    skill's tests call tools through their own audited chain."""
    from codemode.skills.runtime import SkillsRuntime

    tests_chain = build_invoker_chain(
        config,
        invoker,
        session="skill-tests",
        specs=specs,
        approver=None,
        audit_log=parts.audit_log,
        digest_key=parts.digest_key,
    )
    return SkillsRuntime.open(
        config,
        state_store,
        sandboxes,
        access,
        tests_chain.invoker,
        isolated=sandboxes.isolated,
        checkpoints=parts.shared.checkpoints if parts.shared is not None else None,
        specs=catalog.specs,
        version=lambda: catalog.version,
        test_packages=tests_chain.packages,
    )

"""The catalog: every tool of every upstream, listed once and called by ``(server, tool)``.

``load()`` lists all upstreams concurrently; one that fails is recorded in ``failures`` and the
rest load. Definitions come from the definition cache when the server's config fingerprint
matches. A server announcing ``tools/list_changed`` is re-listed in the background and the
catalog's listeners are told. ``unavailable()`` names every server the agent cannot use and why:
those whose config is broken (given as ``problems``) and those that failed to load.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from codemode.catalog.cache import DefinitionCache
from codemode.connectors.base import BlockingCall, Connector
from codemode.errors import CodemodeError, ToolNotFoundError, UpstreamUnavailableError
from codemode.tools import ToolResult, ToolSpec

if TYPE_CHECKING:
    from codemode.settings.policy import PolicySettings

__all__ = ["Catalog", "ChangeListener"]

logger = logging.getLogger(__name__)

ChangeListener = Callable[[str], None]


class Catalog:
    """Tools of several connectors. ``fingerprints`` maps a server to its config hash (cache key);
    servers without one are never cached. Servers in ``eager`` are started by ``load()`` even when
    their tools come from the cache. ``problems`` maps a configured server that has no connector
    (its config is broken) to the reason. ``concurrency`` caps the calls in flight per server."""

    def __init__(
        self,
        connectors: Iterable[Connector],
        *,
        cache: DefinitionCache | None = None,
        fingerprints: Mapping[str, str] | None = None,
        eager: Collection[str] = (),
        problems: Mapping[str, str] | None = None,
        concurrency: Mapping[str, int] | None = None,
        policy: PolicySettings | None = None,
    ) -> None:
        # The policy the startup warning about unannotated tools speaks for; the warning is
        # logged once, on the first load, unless ``announce_unannotated`` is turned off.
        self.policy = policy
        self.announce_unannotated = True
        self._connectors: dict[str, Connector] = {}
        for connector in connectors:
            if connector.name in self._connectors:
                raise ValueError(f"two connectors named {connector.name!r}")
            self._connectors[connector.name] = connector
            connector.on_tools_changed(self._on_tools_changed)
        self._problems = dict(problems or {})
        both = sorted(self._problems.keys() & self._connectors.keys())
        if both:
            raise ValueError(f"servers {both} have a connector and a config problem")
        self._cache = cache
        self._fingerprints = dict(fingerprints or {})
        self._eager = set(eager)
        self._tools: dict[str, dict[str, ToolSpec]] = {}
        self.failures: dict[str, str] = {}
        self._listeners: list[ChangeListener] = []
        self._refreshes: set[asyncio.Task[None]] = set()
        self._announced = False
        self.version = 0
        # Calls in flight to one server at most (awaitable calls from code run together).
        self._slots = {
            name: asyncio.Semaphore(limit) for name, limit in (concurrency or {}).items()
        }

    # --- reading ----------------------------------------------------------------------------

    @property
    def servers(self) -> list[str]:
        return list(self._connectors)

    def connector(self, server: str) -> Connector:
        return self._connectors[server]

    def specs(self) -> list[ToolSpec]:
        # In connector order, whatever order the upstreams answered in.
        return [spec for name in self._connectors for spec in self._tools.get(name, {}).values()]

    def server_specs(self, server: str) -> list[ToolSpec]:
        return list(self._tools.get(server, {}).values())

    def unavailable(self) -> dict[str, str]:
        """Every server the agent cannot use now, with the reason: broken config, failed load."""
        down = dict(self._problems)
        down.update((name, reason) for name, reason in self.failures.items())
        return down

    def get(self, server: str, tool: str) -> ToolSpec:
        tools = self._tools.get(server)
        if tools is None:
            if server in self._problems:
                raise UpstreamUnavailableError(
                    f"server {server!r} is unavailable: {self._problems[server]}",
                    fix="fix the server's entry in the codemode config and restart codemode",
                )
            if server in self.failures:
                raise UpstreamUnavailableError(
                    f"server {server!r} is unavailable: {self.failures[server]}",
                    fix="fix the server (see its error) and retry; it is retried on each call",
                )
            raise ToolNotFoundError(
                f"no server named {server!r}", fix=_suggest(server, list(self._connectors))
            )
        spec = tools.get(tool)
        if spec is None:
            raise ToolNotFoundError(
                f"server {server!r} has no tool {tool!r}", fix=_suggest(tool, list(tools))
            )
        return spec

    def add_listener(self, listener: ChangeListener) -> None:
        """``listener(server)`` runs after a server's tools were re-listed."""
        self._listeners.append(listener)

    # --- loading ------------------------------------------------------------------------------

    async def load(self) -> dict[str, str]:
        """List every server's tools concurrently. Returns the failures (server -> message)."""
        await asyncio.gather(*(self._load_one(name) for name in self._connectors))
        if not self._announced and self.announce_unannotated:
            self._announced = True
            _announce_destructive_defaults(self.specs(), self.policy)
        return dict(self.failures)

    async def _load_one(self, server: str) -> bool:
        """Load one server's tools; True when that made it available or unavailable."""
        was_up = server in self._tools
        connector = self._connectors[server]
        fingerprint = self._fingerprints.get(server)
        cached = (
            self._cache.get(server, fingerprint)
            if self._cache is not None and fingerprint
            else None
        )
        try:
            if cached is not None:
                specs = cached
                if server in self._eager:
                    await connector.start()
            else:
                specs = await connector.list_tools()
                if self._cache is not None and fingerprint:
                    self._cache.put(server, fingerprint, specs)
        except CodemodeError as error:
            self._fail(server, str(error))
            return was_up
        except Exception as error:
            logger.exception("loading server %r failed", server)
            self._fail(server, f"{type(error).__name__}: {error}")
            return was_up
        self._tools[server] = {spec.name: spec for spec in specs}
        self.failures.pop(server, None)
        return not was_up

    def _fail(self, server: str, message: str) -> None:
        logger.warning("server %r did not load: %s", server, message)
        self.failures[server] = message
        self._tools.pop(server, None)

    async def refresh(self, server: str) -> None:
        """Re-list one server's tools (cache bypassed and updated), then tell the listeners."""
        if server not in self._connectors:
            raise ToolNotFoundError(
                f"no server named {server!r}", fix=_suggest(server, self.servers)
            )
        if self._cache is not None:
            self._cache.invalidate(server)
        await self._load_one(server)
        self._changed(server)

    def _changed(self, server: str) -> None:
        self.version += 1
        for listener in list(self._listeners):
            try:
                listener(server)
            except Exception:
                logger.exception("catalog listener failed for %r", server)

    def _on_tools_changed(self, server: str) -> None:
        task = asyncio.get_running_loop().create_task(self.refresh(server))
        self._refreshes.add(task)
        task.add_done_callback(self._refreshes.discard)

    # --- calling ------------------------------------------------------------------------------

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> ToolResult:
        # A server that was down at load may be back.
        if server in self.failures and server not in self._tools and await self._load_one(server):
            self._changed(server)
        self.get(server, tool)
        slots = self._slots.get(server)
        if slots is None:
            return await self._connectors[server].call_tool(tool, arguments)
        async with slots:
            return await self._connectors[server].call_tool(tool, arguments)

    def blocking_call(self, server: str, tool: str) -> BlockingCall | None:
        """``call`` as a blocking function of the arguments, where the server's connector has
        one (``Connector.blocking_call``) and nothing on the loop stands before it (a bound
        on concurrent calls, a server to load again); None: ``call`` on the loop."""
        connector = self._connectors.get(server)
        if connector is None or server in self.failures or server in self._slots:
            return None
        blocking = connector.blocking_call(tool)
        if blocking is not None:
            self.get(server, tool)  # what ``call`` checks first
        return blocking

    async def start(self, servers: Iterable[str] | None = None) -> None:
        """Start connectors that have something to start (MCP) ahead of the first call."""
        names = list(servers) if servers is not None else list(self._connectors)
        await asyncio.gather(*(self._connectors[name].start() for name in names))

    async def aclose(self) -> None:
        for task in list(self._refreshes):
            task.cancel()
        if self._refreshes:
            await asyncio.wait(self._refreshes, timeout=5.0)
        results = await asyncio.gather(
            *(connector.aclose() for connector in self._connectors.values()),
            return_exceptions=True,
        )
        for name, result in zip(self._connectors, results, strict=True):
            if isinstance(result, BaseException):
                logger.warning("closing server %r failed: %r", name, result)
        if self._cache is not None:
            self._cache.close()


def _announce_destructive_defaults(
    specs: Iterable[ToolSpec], policy: PolicySettings | None
) -> None:
    """Say once which MCP tools ask for approval only because they carry no annotations (and
    the config that marks them); tools the config already marks are not counted."""
    from codemode.policy.unannotated import unannotated_advice
    from codemode.settings.policy import PolicySettings

    advice = unannotated_advice(specs, policy or PolicySettings())
    if advice:
        logger.warning("%s", advice)


def _suggest(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=3)
    if close:
        return f"did you mean {', '.join(repr(c) for c in close)}?"
    return "search the catalog for the right name"

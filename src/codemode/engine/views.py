"""What the sandbox sees of the catalog: the generated modules and the granted tools.

Rebuilt whenever the catalog's version changes; an execution uses the views it started with.
Besides ``servers.*``, the host serves codemode's own modules (``state``), whose calls go to
built-in servers that need no grant from the catalog.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from codemode.bridge.host import (
    ModuleSource,
    PackageProvider,
    RefusalHook,
    ToolAccess,
    ToolInvoker,
)
from codemode.catalog.catalog import Catalog
from codemode.errors import CodemodeError
from codemode.tools import ToolSpec

if TYPE_CHECKING:
    from codemode.checks.signatures import SignatureTable
    from codemode.settings.policy import PolicySettings
    from codemode.stubs.package import ObservedShapes, StubLibrary

__all__ = ["BUILTIN_SERVERS", "CatalogViews", "StubModules"]


BUILTIN_SERVERS = frozenset({"_state"})


def _builtin_module(fullname: str) -> ModuleSource | None:
    if fullname == "state":
        from codemode.state.tools import state_module_source

        return ModuleSource(state_module_source(), False, "state.py")
    return None


class StubModules:
    """Adapts the stub library to the bridge's ``ModuleProvider`` (plus codemode's own)."""

    def __init__(self, library: StubLibrary) -> None:
        self.library = library

    def module_source(self, fullname: str) -> ModuleSource | None:
        if fullname != "servers" and not fullname.startswith("servers."):
            return _builtin_module(fullname)
        source = self.library.module_source(fullname)
        if source is None:
            return None
        is_package = self.library.is_package(fullname)
        filename = fullname.replace(".", "/") + ("/__init__.py" if is_package else ".py")
        return ModuleSource(source, is_package, filename)


@dataclass(frozen=True)
class CatalogViews:
    version: int
    stubs: StubLibrary
    modules: StubModules
    tools: frozenset[tuple[str, str]]
    specs: list[ToolSpec] = field(default_factory=list, repr=False)

    @cached_property
    def signatures(self) -> SignatureTable:
        """The generated functions' signatures, for checking calls before code runs."""
        from codemode.checks.signatures import SignatureTable

        return SignatureTable.from_specs(self.specs, self.stubs.unavailable)

    @classmethod
    def build(
        cls,
        specs: list[ToolSpec],
        version: int,
        unavailable: Mapping[str, str] | None = None,
        observed: ObservedShapes | None = None,
        policy: PolicySettings | None = None,
    ) -> CatalogViews:
        """``unavailable``: servers that are down and why (importing one raises, saying so).
        ``observed``: the result shapes seen so far; the stubs follow them as they change.
        ``policy``: each stub says what it will do with the tool's calls."""
        from codemode.stubs.package import StubLibrary

        note: Callable[[ToolSpec], str | None] | None = None
        if policy is not None:
            from codemode.policy import Policy
            from codemode.policy.unannotated import policy_note

            deciding = Policy(policy)

            def note(spec: ToolSpec) -> str | None:
                return policy_note(spec, deciding)

        library = StubLibrary(specs, unavailable=unavailable, observed=observed, policy_note=note)
        tools = frozenset((spec.server, spec.name) for spec in specs)
        return cls(version, library, StubModules(library), tools, list(specs))

    def granted(self, server: str, tool: str) -> bool:
        return (server, tool) in self.tools or server in BUILTIN_SERVERS

    def access(
        self,
        invoker: ToolInvoker,
        on_refused: RefusalHook | None = None,
        packages: PackageProvider | None = None,
    ) -> ToolAccess:
        """What one execution may reach: these modules, these tools, through ``invoker``
        (``on_refused``, ``packages``: as ``ToolAccess`` has them)."""
        return ToolAccess(invoker, self.modules, self.granted, on_refused, packages)


def spec_lookup(catalog: Catalog) -> Callable[[str, str], ToolSpec | None]:
    """``(server, tool) -> spec``, None for a tool the catalog does not hold (now)."""

    def lookup(server: str, tool: str) -> ToolSpec | None:
        try:
            return catalog.get(server, tool)
        except CodemodeError:
            return None

    return lookup

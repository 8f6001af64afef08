"""Python names for tools: exactly the ones the generated stubs use (``codemode.stubs.naming``).

Names are assigned in groups (the servers together, each server's tools together) because
colliding names are de-duplicated within a group, as ``StubLibrary`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

from codemode.stubs.naming import server_names, tool_names
from codemode.tools import ToolSpec

__all__ = ["python_names"]


def python_names(specs: Sequence[ToolSpec]) -> list[tuple[str, str]]:
    """``(module, function)`` per spec: ``from servers import module``, ``module.function()``."""
    by_server: dict[str, list[str]] = {}
    for spec in specs:
        by_server.setdefault(spec.server, []).append(spec.name)
    functions = {server: tool_names(names) for server, names in by_server.items()}
    modules = server_names(by_server)
    return [(modules[s.server], functions[s.server][s.name]) for s in specs]

"""Python names for tools, the ones the generated stubs use (``codemode.stubs.naming``).

Names are assigned in groups (the servers together, each server's tools together) because
colliding names are de-duplicated within a group, as ``StubLibrary`` does. A fallback with the
same rule keeps search usable without the stubs package.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Sequence

from codemode.tools import ToolSpec

__all__ = ["python_names"]

_NON_IDENT = re.compile(r"[^0-9a-zA-Z]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])|([A-Z]+)([A-Z][a-z])")


def _identifier(name: str, fallback: str) -> str:
    spaced = _CAMEL.sub(lambda m: f"{m[1] or m[3]}_{m[2] or m[4]}", name)
    ident = _NON_IDENT.sub("_", spaced).strip("_").lower() or fallback
    if ident[0].isdigit():
        ident = f"{fallback}_{ident}"
    return f"{ident}_" if keyword.iskeyword(ident) else ident


def _fallback_assign(names: Iterable[str], fallback: str) -> dict[str, str]:
    taken: set[str] = set()
    result: dict[str, str] = {}
    for name in sorted(set(names)):
        base = candidate = _identifier(name, fallback)
        n = 2
        while candidate in taken:
            candidate, n = f"{base}_{n}", n + 1
        taken.add(candidate)
        result[name] = candidate
    return result


def _server_names(servers: Iterable[str]) -> dict[str, str]:
    try:
        from codemode.stubs.naming import server_names
    except ImportError:
        return _fallback_assign(servers, "server")
    return server_names(servers)


def _tool_names(tools: Iterable[str]) -> dict[str, str]:
    try:
        from codemode.stubs.naming import tool_names
    except ImportError:
        return _fallback_assign(tools, "tool")
    return tool_names(tools)


def python_names(specs: Sequence[ToolSpec]) -> list[tuple[str, str]]:
    """``(module, function)`` per spec: ``from servers import module``, ``module.function()``."""
    by_server: dict[str, list[str]] = {}
    for spec in specs:
        by_server.setdefault(spec.server, []).append(spec.name)
    functions = {server: _tool_names(names) for server, names in by_server.items()}
    modules = _server_names(by_server)
    return [(modules[s.server], functions[s.server][s.name]) for s in specs]

"""The generated ``servers`` package, served from memory or written to disk."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Protocol

from codemode.errors import ToolNotFoundError
from codemode.stubs.naming import server_names, tool_names
from codemode.stubs.render import (
    GENERATED_MARKER,
    render_root_init,
    render_runtime_fallback,
    render_server_init,
    render_tool_module,
    render_unavailable_server,
)
from codemode.tools import ToolSpec

__all__ = ["ROOT_PACKAGE", "ObservedShapes", "StubLibrary"]

ROOT_PACKAGE = "servers"
DEFAULT_CACHE_SIZE = 512


class ObservedShapes(Protocol):
    """The shapes tools' results were seen to have (``codemode.catalog.observed.ShapeBook``)."""

    def describe(self, spec: ToolSpec) -> str | None: ...


class StubLibrary:
    """Python sources of the ``servers`` package for a set of tools.

    ``module_source`` is what the sandbox's import hook asks for; sources are rendered on
    demand and the most recently used ones are kept (an LRU of ``cache_size`` modules).
    ``unavailable`` (server -> reason) names servers that are down: ``servers.<server>`` is then
    a module whose import raises ``ImportError`` with the reason. ``observed`` gives the
    shapes results were seen to have; a tool module is rendered again when its shape changed.
    """

    def __init__(
        self,
        specs: Iterable[ToolSpec],
        *,
        unavailable: Mapping[str, str] | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        observed: ObservedShapes | None = None,
        policy_note: Callable[[ToolSpec], str | None] | None = None,
    ) -> None:
        self.observed = observed
        # What the policy will do with a tool's calls, said in its docstring.
        self.policy_note = policy_note
        self._by_server: dict[str, dict[str, ToolSpec]] = {}
        for spec in specs:
            self._by_server.setdefault(spec.server, {})[spec.name] = spec
        self._down = {
            server: reason
            for server, reason in (unavailable or {}).items()
            if server not in self._by_server
        }
        names = server_names([*self._by_server, *self._down])
        self._server_py = {server: names[server] for server in self._by_server}
        self._server_up = {py: up for up, py in self._server_py.items()}
        self._down_up = {names[server]: server for server in self._down}
        self._tool_py: dict[str, dict[str, str]] = {
            server: tool_names(tools) for server, tools in self._by_server.items()
        }
        self._tool_up: dict[str, dict[str, str]] = {
            server: {py: up for up, py in names.items()} for server, names in self._tool_py.items()
        }
        # fullname -> (source, the observed shape it was rendered with)
        self._cache: OrderedDict[str, tuple[str, str | None]] = OrderedDict()
        self._cache_size = cache_size

    @property
    def servers(self) -> dict[str, str]:
        """Upstream server name -> package name (``servers.<package>``)."""
        return dict(self._server_py)

    @property
    def unavailable(self) -> dict[str, str]:
        """Servers that are down -> why (importing one raises ``ImportError`` saying so)."""
        return dict(self._down)

    def tool_names(self, server: str) -> dict[str, str]:
        """Python name -> upstream tool name, for one (upstream) server."""
        return dict(self._tool_up.get(server, {}))

    def python_name(self, server: str, tool: str) -> str:
        """``"<package>.<function>"``: how code inside the sandbox reaches the tool."""
        self._spec(server, tool)
        return f"{self._server_py[server]}.{self._tool_py[server][tool]}"

    def resolve(self, package: str, function: str) -> tuple[str, str] | None:
        """(upstream server, upstream tool) for a Python package and function name."""
        server = self._server_up.get(package)
        if server is None:
            return None
        tool = self._tool_up[server].get(function)
        return (server, tool) if tool is not None else None

    def tool_source(self, server: str, tool: str) -> str:
        """The generated module of one tool (search's ``full`` detail)."""
        self._spec(server, tool)
        source = self.module_source(
            f"{ROOT_PACKAGE}.{self._server_py[server]}.{self._tool_py[server][tool]}"
        )
        assert source is not None
        return source

    def module_source(self, fullname: str) -> str | None:
        """Source of ``servers``, ``servers.<server>`` or ``servers.<server>.<tool>``, else None.

        ``servers._runtime`` is not generated here: the sandbox provides it.
        """
        observed = self._observed(fullname)
        cached = self._cache.get(fullname)
        if cached is not None and cached[1] == observed:
            self._cache.move_to_end(fullname)
            return cached[0]
        source = self._render(fullname, observed)
        if source is not None:
            self._cache[fullname] = (source, observed)
            self._cache.move_to_end(fullname)
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return source

    def is_package(self, fullname: str) -> bool:
        parts = fullname.split(".")
        return parts == [ROOT_PACKAGE] or (
            len(parts) == 2 and parts[0] == ROOT_PACKAGE and parts[1] in self._server_up
        )

    def write_package(self, outdir: str | Path) -> list[Path]:
        """Write ``<outdir>/servers/...`` (with a stand-in ``_runtime.py``); returns the files.

        Files from an earlier run that carry the generated-file marker and are no longer part
        of the package are removed; other files are left alone.
        """
        root = Path(outdir) / ROOT_PACKAGE
        files: dict[Path, str] = {
            root / "__init__.py": self._render_root(),
            root / "_runtime.py": render_runtime_fallback(),
        }
        for package, server in sorted(self._down_up.items()):
            files[root / f"{package}.py"] = render_unavailable_server(
                server, self._down[server], package=package
            )
        for server, package in sorted(self._server_py.items(), key=lambda item: item[1]):
            tools = self._by_server[server]
            files[root / package / "__init__.py"] = render_server_init(server, list(tools.values()))
            for tool, function in sorted(self._tool_py[server].items(), key=lambda i: i[1]):
                observed = self.observed.describe(tools[tool]) if self.observed else None
                files[root / package / f"{function}.py"] = render_tool_module(
                    tools[tool],
                    function_name=function,
                    observed=observed,
                    policy_note=self._note(tools[tool]),
                )
        if root.is_dir():
            for stale in sorted(root.rglob("*.py")):
                if stale not in files and _is_generated(stale):
                    stale.unlink()
        for path, source in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.is_file() or path.read_text(encoding="utf-8") != source:
                path.write_text(source, encoding="utf-8")
        return sorted(files)

    def _spec(self, server: str, tool: str) -> ToolSpec:
        spec = self._by_server.get(server, {}).get(tool)
        if spec is None:
            raise ToolNotFoundError(
                f"no tool {tool!r} on server {server!r}",
                fix="search the catalog for the tool's exact server and name",
            )
        return spec

    def _observed(self, fullname: str) -> str | None:
        """The observed result shape of the tool module ``fullname`` (None for other modules)."""
        if self.observed is None or fullname.count(".") != 2:
            return None
        _, package, function = fullname.split(".")
        server = self._server_up.get(package)
        tool = self._tool_up[server].get(function) if server is not None else None
        if server is None or tool is None:
            return None
        return self.observed.describe(self._by_server[server][tool])

    def _render(self, fullname: str, observed: str | None = None) -> str | None:
        parts = fullname.split(".")
        if parts[0] != ROOT_PACKAGE:
            return None
        if len(parts) == 1:
            return self._render_root()
        server = self._server_up.get(parts[1])
        if server is None:
            down = self._down_up.get(parts[1])
            if down is None or len(parts) != 2:
                return None
            return render_unavailable_server(down, self._down[down], package=parts[1])
        tools = self._by_server[server]
        if len(parts) == 2:
            return render_server_init(server, list(tools.values()))
        if len(parts) == 3:
            tool = self._tool_up[server].get(parts[2])
            if tool is not None:
                return render_tool_module(
                    tools[tool],
                    function_name=parts[2],
                    observed=observed,
                    policy_note=self._note(tools[tool]),
                )
        return None

    def _note(self, spec: ToolSpec) -> str | None:
        return self.policy_note(spec) if self.policy_note is not None else None

    def _render_root(self) -> str:
        servers = {s: list(t.values()) for s, t in self._by_server.items()}
        return render_root_init(servers, self._down)


def _is_generated(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as handle:
            return handle.readline().rstrip("\n") == GENERATED_MARKER
    except (OSError, UnicodeDecodeError):
        return False

"""The privacy modules import one another without a circle, counting every import: those
inside functions and under ``TYPE_CHECKING`` too (test_architecture counts only load-time
imports between packages)."""

from __future__ import annotations

import ast
from pathlib import Path

import codemode.privacy

PACKAGE = Path(codemode.privacy.__file__).parent


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_module_of_privacy_imports_one_that_imports_it_back() -> None:
    modules = {
        f"codemode.privacy.{p.stem}": p for p in PACKAGE.glob("*.py") if p.stem != "__init__"
    }
    graph = {name: _imports(path) & set(modules) - {name} for name, path in modules.items()}
    circles: list[list[str]] = []

    def walk(node: str, trail: list[str]) -> None:
        for target in sorted(graph[node]):
            if target in trail:
                circles.append([*trail[trail.index(target) :], target])
            elif not circles:
                walk(target, [*trail, target])

    for name in sorted(graph):
        walk(name, [name])
    assert not circles, " -> ".join(circles[0])

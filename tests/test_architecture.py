"""The shape of the code: packages import one another without cycles; modules stay small.

Only imports that run when a module loads count (not those under ``TYPE_CHECKING`` or inside
functions, which are how light imports and optional dependencies are kept light).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "codemode"
MAX_LINES = 500


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def load_time_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for child in (
            ast.walk(node)
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            else ()
        ):
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.add(child.module)
    return {name for name in found if name.startswith("codemode")}


def package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def modules() -> list[Path]:
    return [path for path in SRC.rglob("*.py") if "guest" not in path.parts]


def test_packages_import_one_another_without_cycles() -> None:
    graph: dict[str, set[str]] = {}
    for path in modules():
        source = package_of(module_name(path))
        targets = {package_of(name) for name in load_time_imports(path)}
        graph.setdefault(source, set()).update(targets - {source, "codemode"})
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        if node in trail:
            cycles.append([*trail[trail.index(node) :], node])
            return
        for target in sorted(graph.get(node, ())):
            visit(target, [*trail, node])

    for start in sorted(graph):
        visit(start, [])
    assert not cycles, "import cycles between packages: " + "; ".join(
        " -> ".join(cycle) for cycle in cycles[:5]
    )


def test_modules_stay_small() -> None:
    large = {
        str(path.relative_to(SRC)): count
        for path in modules()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not large, f"modules over {MAX_LINES} lines (split them): {large}"

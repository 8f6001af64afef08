"""The shape of the code: modules import one another without circles and downward only; modules
stay small.

Every import of a ``codemode`` module counts, wherever it is written: at the top, inside a
function (a lazy import) or under ``TYPE_CHECKING``. A lazy import only moves the moment the
dependency is paid; it is still a dependency, and a circle through it is still a circle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "codemode"
MAX_LINES = 500

# The packages (and top-level modules) from the bottom up: a module imports only from its own
# layer or the layers below. CONTRIBUTING.md ("How the code is laid out") shows the same order.
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer.split())
    for layer in (
        "errors tools config_model jsonpointer terminal_text sdk_compat hostnames tokens heap cpus",
        "settings bridge testing storage",
        "policy",
        "privacy",
        "config stubs state egress",
        "connectors search audit checkpoints",
        "catalog sandbox",
        "memory checks skills cluster files",
        "engine",
        "replicas",
        "agent gateway ledger",
        "cli demo codemode __main__",
    )
)

# The one upward import allowed: the engine picks the shared (replicas) implementation of its
# parts when ``[gateway] shared_store`` is set.
ALLOWED_UPWARD = 1


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> list[Path]:
    return [path for path in SRC.rglob("*.py") if "guest" not in path.parts]


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Every ``codemode`` module ``path`` imports, at any depth of its code.

    ``from codemode.pkg import name`` names the module ``codemode.pkg.name`` when there is one,
    else the package ``codemode.pkg``.
    """

    def nearest(name: str) -> str:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(nearest(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in known else nearest(node.module))
    return {name for name in found if name.startswith("codemode.")}


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in modules()}
    known = set(paths)
    return {name: imported_modules(path, known) - {name} for name, path in paths.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def one_circle(graph: dict[str, set[str]], members: list[str]) -> list[str]:
    """A path that closes on itself inside ``members``, for the message."""
    inside = set(members)
    trail = [members[0]]
    while True:
        step = min(target for target in graph[trail[-1]] if target in inside)
        if step in trail:
            return [*trail[trail.index(step) :], step]
        trail.append(step)


def layer_of(module: str) -> int:
    parts = module.split(".")
    unit = parts[1] if len(parts) > 1 else parts[0]
    for number, layer in enumerate(LAYERS):
        if unit in layer:
            return number
    raise AssertionError(
        f"{module} is in no layer: add its package to LAYERS in tests/test_architecture.py "
        "(and to the import order in CONTRIBUTING.md)"
    )


def upward_imports(graph: dict[str, set[str]]) -> Iterator[str]:
    for source in sorted(graph):
        for target in sorted(graph[source]):
            if layer_of(target) > layer_of(source):
                yield f"{source} -> {target}"


def test_modules_import_one_another_without_circles() -> None:
    graph = import_graph()
    found = list(circles(graph))
    assert not found, (
        "import circles between modules (lazy and TYPE_CHECKING imports count): "
        + "; ".join(" -> ".join(one_circle(graph, members)) for members in found)
        + ". Break each one: move what both sides need into a module below them, or hand the "
        "lower module an object (or a Protocol it declares) instead of importing the upper one"
    )


def test_imports_point_down_the_layers() -> None:
    upward = list(upward_imports(import_graph()))
    assert len(upward) <= ALLOWED_UPWARD, (
        f"{len(upward)} imports point up the layers (at most {ALLOWED_UPWARD} allowed): "
        + "; ".join(upward)
        + ". Move the import's target down, or pass the upper part in as an object"
    )


def test_every_package_has_a_layer() -> None:
    for name in import_graph():
        layer_of(name)


def test_modules_stay_small() -> None:
    large = {
        str(path.relative_to(SRC)): count
        for path in modules()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not large, f"modules over {MAX_LINES} lines (split them): {large}"

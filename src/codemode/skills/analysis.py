"""What a skill's source defines and calls, found statically with ``ast`` (never run here)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from codemode.errors import SkillRefusedError

__all__ = ["SourceFacts", "analyze", "top_level_imports"]


@dataclass(frozen=True)
class SourceFacts:
    signature: str
    docstring: str
    # ("server", "python_tool_name") pairs the code calls through ``servers``.
    tool_calls: tuple[tuple[str, str], ...]
    # Other skills it imports.
    requires: tuple[str, ...]


def analyze(source: str, name: str) -> SourceFacts:
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise SkillRefusedError(
            f"skill {name!r} does not parse: {error.msg} (line {error.lineno})",
            fix="pass source that runs as a module on its own",
        ) from None
    target = _definition(tree, name)
    if target is None:
        raise SkillRefusedError(
            f"the skill's source defines no top-level function or class named {name!r}",
            fix=f"name the skill after its function: save({name}, ...) or name='<function>'",
        )
    return SourceFacts(
        signature=_signature(target),
        docstring=(ast.get_docstring(target) or "").strip(),
        tool_calls=tuple(sorted(_tool_calls(tree))),
        requires=tuple(sorted(_skill_imports(tree) - {name})),
    )


def _definition(
    tree: ast.Module, name: str
) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
            node.name == name
        ):
            return node
    return None


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    if isinstance(node, ast.ClassDef):
        return f"class {node.name}"
    text = f"{node.name}({ast.unparse(node.args)})"
    if node.returns is not None:
        text += f" -> {ast.unparse(node.returns)}"
    return text


def _tool_calls(tree: ast.Module) -> set[tuple[str, str]]:
    servers: dict[str, str] = {}  # local name -> server
    functions: dict[str, tuple[str, str]] = {}  # local name -> (server, tool)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[0] != "servers":
                continue
            for alias in node.names:
                local = alias.asname or alias.name
                if len(parts) == 1:
                    servers[local] = alias.name
                elif len(parts) == 2:
                    functions[local] = (parts[1], alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "servers" and len(parts) >= 2 and alias.asname:
                    servers[alias.asname] = parts[1]
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id in servers:
                found.add((servers[func.value.id], func.attr))
        elif isinstance(func, ast.Name) and func.id in functions:
            found.add(functions[func.id])
        elif (  # servers.shop.list_items(...)
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Attribute)
            and isinstance(func.value.value, ast.Name)
            and func.value.value.id == "servers"
        ):
            found.add((func.value.attr, func.attr))
    return found


def _skill_imports(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[0] != "skills":
                continue
            if len(parts) == 1:
                found |= {alias.name for alias in node.names if alias.name not in ("save", "*")}
            else:
                found.add(parts[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "skills" and len(parts) >= 2:
                    found.add(parts[1])
    return found


def top_level_imports(text: str) -> set[str]:
    """The top-level names of the modules ``text`` imports (absolute imports, at any depth of
    its code); none when it does not parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.partition(".")[0])
    return names

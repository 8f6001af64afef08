"""A static check of every call on ``servers.*`` before the code runs.

Finds, with no upstream call: unknown servers and tools, unknown or missing keywords,
positional arguments (the generated functions take keywords only) and literals of an obviously
wrong type (a string where the schema says integer). Code it cannot follow (aliases it loses
track of, ``**kwargs``, dynamic attribute access) is left to run: the check has no false alarms
by design, only misses.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codemode.checks.signatures import SignatureTable, ToolSignature

__all__ = ["CallProblem", "check_calls"]


@dataclass(frozen=True, slots=True)
class CallProblem:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


_JSON_OF_LITERAL = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    type(None): "null",
}


def check_calls(code: str, table: SignatureTable) -> list[CallProblem]:
    """Problems in ``code``'s calls on generated functions; empty when none (or unparsable:
    the sandbox reports syntax errors itself, with their own line)."""
    if "servers" not in code:
        return []  # only names imported from ``servers`` in this code are checked: none here
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    checker = _Checker(table)
    checker.walk(tree)
    # Source order for the reader: the walk meets a decorator after the body it decorates.
    return sorted(checker.problems, key=lambda problem: problem.line)


def _suggest(name: str, options: list[str]) -> str:
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node type that may hold nodes: ``ctx`` (a Load/Store marker on every
    name) is left out, which halves the nodes visited. Lists may hold plain strings (``global``
    names): those have no fields and are passed over."""
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = tuple(name for name in getattr(kind, "_fields", ()) if name != "ctx")
        _CHILD_FIELDS[kind] = fields
    return fields


class _Checker:
    """Walks the tree in source order (pre-order), calling the handler of each node type that
    has one. A hand-rolled walk: ``ast.NodeVisitor``'s per-node dispatch doubled the cost."""

    def __init__(self, table: SignatureTable) -> None:
        self.table = table
        self.problems: list[CallProblem] = []
        # local name -> ("package", server) | ("root", "") | ("tool", "server.function")
        self.names: dict[str, tuple[str, str]] = {}
        self._handlers: dict[type[ast.AST], Callable[[Any], None]] = {
            ast.Import: self._import,
            ast.ImportFrom: self._import_from,
            ast.Assign: self._assign,
            ast.AnnAssign: self._ann_assign,
            ast.For: self._loop,
            ast.AsyncFor: self._loop,
            ast.With: self._with,
            ast.AsyncWith: self._with,
            ast.FunctionDef: self._function,
            ast.AsyncFunctionDef: self._function,
            ast.Lambda: self._function,
            ast.ListComp: self._comprehension,
            ast.SetComp: self._comprehension,
            ast.GeneratorExp: self._comprehension,
            ast.DictComp: self._dict_comprehension,
            ast.NamedExpr: self._named_expr,
            ast.Call: self._call,
        }

    def walk(self, tree: ast.AST) -> None:
        handlers, stack = self._handlers, [tree]
        node_type = ast.AST
        while stack:
            node = stack.pop()
            kind = type(node)
            handler = handlers.get(kind)
            if handler is not None:
                handler(node)
            children: list[Any] = []
            for field in _child_fields(kind):
                value = getattr(node, field, None)
                if isinstance(value, list):
                    children.extend(value)
                elif isinstance(value, node_type):
                    children.append(value)
            if children:
                children.reverse()
                stack.extend(children)

    # --- what names refer to -------------------------------------------------------------

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            parts = alias.name.split(".")
            if parts[0] != "servers":
                # `import time` after `from servers import time`: the name is not ours now.
                self.names.pop(alias.asname or parts[0], None)
                continue
            if alias.asname is None:
                self.names["servers"] = ("root", "")
            elif len(parts) == 2:
                self._bind_package(alias.asname, parts[1], node.lineno)
            elif len(parts) == 3:
                self._bind_tool(alias.asname, parts[1], parts[2], node.lineno)

    def _import_from(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        parts = module.split(".")
        if node.level or parts[0] != "servers":
            for alias in node.names:
                self.names.pop(alias.asname or alias.name, None)
            return
        for alias in node.names:
            local = alias.asname or alias.name
            if alias.name == "*":
                continue
            if len(parts) == 1:
                if alias.name not in ("ToolError", "call_tool"):
                    self._bind_package(local, alias.name, node.lineno)
            elif len(parts) == 2:
                self._bind_tool(local, parts[1], alias.name, node.lineno)

    def _bind_package(self, local: str, package: str, line: int) -> None:
        if package.startswith("_") or package in self.table.unavailable:
            return  # a server that is down: its import raises at run time, saying why
        if package not in self.table.servers:
            known = sorted(self.table.servers)
            self._problem(line, f"no server {package!r}{_suggest(package, known)}")
            return
        self.names[local] = ("package", package)

    def _bind_tool(self, local: str, package: str, function: str, line: int) -> None:
        if package not in self.table.servers:
            self._bind_package(local, package, line)
            return
        if self.table.tool(package, function) is None:
            self._unknown_tool(line, package, function)
            return
        self.names[local] = ("tool", f"{package}.{function}")

    # A name rebound to something else (an assignment, a loop, a parameter...) is no longer
    # ours to check: forgetting it can only cost a miss, never a false alarm.

    def _forget(self, target: ast.AST | None) -> None:
        if target is None:
            return
        for child in ast.walk(target):
            if isinstance(child, ast.Name):
                self.names.pop(child.id, None)
            elif isinstance(child, ast.arg):
                self.names.pop(child.arg, None)

    def _assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._forget(target)

    def _ann_assign(self, node: ast.AnnAssign) -> None:
        self._forget(node.target)

    def _loop(self, node: ast.For | ast.AsyncFor) -> None:
        self._forget(node.target)

    def _with(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self._forget(item.optional_vars)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self._forget(node.args)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> None:
        # The element is visited before the loops: forget their targets first.
        for generator in node.generators:
            self._forget(generator.target)

    def _dict_comprehension(self, node: ast.DictComp) -> None:
        for generator in node.generators:
            self._forget(generator.target)

    def _named_expr(self, node: ast.NamedExpr) -> None:
        self._forget(node.target)

    # --- calls -----------------------------------------------------------------------------

    def _call(self, node: ast.Call) -> None:
        func = node.func
        # ``tool.aio(...)``, the awaitable form, takes the tool's own arguments.
        awaitable = isinstance(func, ast.Attribute) and func.attr == "aio"
        resolved = (
            self._resolve(func.value) if isinstance(func, ast.Attribute) and awaitable else None
        )
        if resolved is None:
            resolved = self._resolve(func)
        if resolved is not None:
            package, function = resolved
            signature = self.table.tool(package, function)
            if signature is None:
                self._unknown_tool(node.lineno, package, function)
            else:
                self._check_arguments(node, signature, f"{package}.{function}")

    def _resolve(self, func: ast.expr) -> tuple[str, str] | None:
        if isinstance(func, ast.Name):
            bound = self.names.get(func.id)
            if bound is not None and bound[0] == "tool":
                package, _, function = bound[1].partition(".")
                return package, function
            return None
        if not isinstance(func, ast.Attribute):
            return None
        owner = func.value
        if isinstance(owner, ast.Name):
            bound = self.names.get(owner.id)
            if bound is not None and bound[0] == "package":
                return bound[1], func.attr
            return None
        if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name):
            bound = self.names.get(owner.value.id)
            if bound == ("root", "") and owner.attr in self.table.servers:
                return owner.attr, func.attr
        return None

    def _unknown_tool(self, line: int, package: str, function: str) -> None:
        if function.startswith("_") or function in ("ToolError",):
            return
        known = sorted(self.table.servers.get(package, {}))
        self._problem(
            line, f"servers.{package} has no tool {function!r}{_suggest(function, known)}"
        )

    def _check_arguments(self, node: ast.Call, signature: ToolSignature, name: str) -> None:
        if node.args:
            self._problem(
                node.lineno,
                f"{name}() takes keyword arguments only (got {len(node.args)} positional); "
                f"write {name}({', '.join(f'{p}=...' for p in signature.required) or '...'})",
            )
            return
        if any(keyword.arg is None for keyword in node.keywords):
            return  # **kwargs: cannot know statically
        given = {keyword.arg for keyword in node.keywords if keyword.arg is not None}
        unfilled = [param for param in signature.required if param not in given]
        for keyword in node.keywords:
            assert keyword.arg is not None
            param = signature.params.get(keyword.arg)
            if param is None:
                options = sorted(signature.params)
                suggestion = _suggest(keyword.arg, options)
                if not suggestion and len(unfilled) == 1:
                    # Not a misspelling but another word for it ('sql' for 'query'): the one
                    # required argument left unfilled is what it was meant to be.
                    suggestion = f"; did you mean {unfilled[0]!r}?"
                self._problem(
                    node.lineno,
                    f"{name}() has no argument {keyword.arg!r}{suggestion}"
                    + ("" if options else "; it takes no arguments"),
                )
                continue
            self._check_literal(node.lineno, name, keyword.arg, keyword.value, param.types)
        if unfilled:
            self._problem(
                node.lineno, f"{name}() is missing required argument(s): {', '.join(unfilled)}"
            )

    def _check_literal(
        self, line: int, name: str, keyword: str, value: ast.expr, types: frozenset[str]
    ) -> None:
        if not types or not isinstance(value, ast.Constant):
            return
        kind = _JSON_OF_LITERAL.get(type(value.value))
        if kind is None:
            return
        fits = kind in types or (kind == "integer" and "number" in types)
        if not fits:
            wanted = " or ".join(sorted(types))
            self._problem(
                line, f"{name}(): {keyword}={value.value!r} is a {kind}, but it takes {wanted}"
            )

    def _problem(self, line: int, message: str) -> None:
        self.problems.append(CallProblem(line, message))

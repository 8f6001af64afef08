"""The shape of a tool's result: key names and types, never values, bounded in depth and width.

A shape is plain JSON (so it can be stored) built from these nodes::

    {"t": "str" | "int" | "float" | "bool" | "null" | "any"}
    {"t": "list", "of": <shape> | None}          None: only empty lists were seen
    {"t": "dict", "keys": {name: <shape>}, "opt": [names missing from some results]}
    {"t": "map", "of": <shape> | None}           a dict whose keys are data, not field names
    {"t": "json", "of": <shape>}                 a str holding a JSON object or array
    {"t": "literal", "of": <shape>}              a str holding a Python literal (a repr)
    {"t": "error_text"}                          a str that reads as an error message
    {"t": "union", "of": [<shape>, ...]}         at most ``MAX_UNION`` different kinds

Key names are kept only when they look like field names (identifiers of bounded length, which a
``scrub`` function, e.g. the privacy scanner, leaves unchanged); a dict with other keys, or with
more than ``MAX_KEYS``, is a ``map``: its keys are data and are never recorded.

A tool's whole result that is text is told apart: JSON (decode with ``json.loads``), a Python
literal such as mcp-server-sqlite's ``[{'id': 1}]`` (``ast.literal_eval``), an error message
(``Database error: ...``: a server that reports errors as ordinary text, not ``isError``), or
plain text. A JSON text merged with a Python literal one is a literal: ``ast.literal_eval``
reads both (JSON's ``[]`` is also a Python literal).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_KEYS", "Shape", "merge_shapes", "render_shape", "shape_of"]

Shape = dict[str, Any]
Scrub = Callable[[str], str]

MAX_DEPTH = 4
MAX_KEYS = 24
MAX_UNION = 4
LIST_SAMPLE = 16
JSON_TEXT_LIMIT = 256 * 1024
RENDER_LIMIT = 700
MAX_NODES = 2000  # values looked at per result: bounds the cost of one observation
LITERAL_TEXT_LIMIT = 64 * 1024  # ast.literal_eval is slower than json.loads: a smaller bound
# "Error: ...", "Database error: ...", "ValueError: ...": how servers word an error as text.
_ERROR_TEXT = re.compile(r"\s*(?:[A-Za-z]+[ _]?){0,3}(?:error|exception)\b\s*:", re.IGNORECASE)
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,47}\Z")
_ANY: Shape = {"t": "any"}


class _Budget:
    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def shape_of(
    value: Any, *, scrub: Scrub | None = None, depth: int = 0, budget: _Budget | None = None
) -> Shape:
    """The shape of one value (a result as the sandbox receives it); at most ``MAX_NODES``
    values are looked at (lists and maps by their first ``LIST_SAMPLE`` items)."""
    if budget is None:
        budget = _Budget(MAX_NODES)
    budget.left -= 1
    if depth > MAX_DEPTH or budget.left < 0:
        return dict(_ANY)
    if value is None:
        return {"t": "null"}
    if isinstance(value, bool):
        return {"t": "bool"}
    if isinstance(value, int):
        return {"t": "int"}
    if isinstance(value, float):
        return {"t": "float"}
    if isinstance(value, str):
        return _text_shape(value, scrub, depth, budget)
    if isinstance(value, (list, tuple)):
        return {"t": "list", "of": _items_shape(value[:LIST_SAMPLE], scrub, depth, budget)}
    if isinstance(value, dict):
        return _dict_shape(value, scrub, depth, budget)
    return dict(_ANY)


def _items_shape(items: Any, scrub: Scrub | None, depth: int, budget: _Budget) -> Shape | None:
    of: Shape | None = None
    for item in items:
        item_shape = shape_of(item, scrub=scrub, depth=depth + 1, budget=budget)
        of = item_shape if of is None else merge_shapes(of, item_shape)
    return of


def _text_shape(text: str, scrub: Scrub | None, depth: int, budget: _Budget) -> Shape:
    if depth != 0:
        return {"t": "str"}
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and len(stripped) <= JSON_TEXT_LIMIT:
        try:
            decoded = json.loads(stripped)
        except ValueError:
            pass
        else:
            if isinstance(decoded, (dict, list)):
                of = shape_of(decoded, scrub=scrub, depth=depth + 1, budget=budget)
                return {"t": "json", "of": of}
    if stripped[:1] in ("{", "[", "(") and len(stripped) <= LITERAL_TEXT_LIMIT:
        try:
            literal = ast.literal_eval(stripped)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
        else:
            if isinstance(literal, (dict, list, tuple)):
                of = shape_of(literal, scrub=scrub, depth=depth + 1, budget=budget)
                return {"t": "literal", "of": of}
    if _ERROR_TEXT.match(stripped[:200]):
        return {"t": "error_text"}
    return {"t": "str"}


def _is_field(name: Any, scrub: Scrub | None) -> bool:
    if not isinstance(name, str) or not _FIELD_NAME.match(name):
        return False
    return scrub is None or scrub(name) == name


def _dict_shape(value: dict[Any, Any], scrub: Scrub | None, depth: int, budget: _Budget) -> Shape:
    if len(value) > MAX_KEYS or not all(_is_field(key, scrub) for key in value):
        sample = [item for _, item in zip(range(LIST_SAMPLE), value.values(), strict=False)]
        return {"t": "map", "of": _items_shape(sample, scrub, depth, budget)}
    keys = {
        str(k): shape_of(v, scrub=scrub, depth=depth + 1, budget=budget) for k, v in value.items()
    }
    return {"t": "dict", "keys": keys, "opt": []}


def merge_shapes(a: Shape, b: Shape) -> Shape:
    """The smallest shape both fit (bounded: too many keys or kinds give way to map or any)."""
    kind_a, kind_b = a.get("t"), b.get("t")
    if kind_a == "any" or kind_b == "any":
        return dict(_ANY)
    if kind_a == "union" or kind_b == "union":
        return _merge_union(_options(a) + _options(b))
    if kind_a != kind_b:
        if {kind_a, kind_b} == {"int", "float"}:
            return {"t": "float"}
        if {kind_a, kind_b} == {"json", "literal"}:
            return {"t": "literal", "of": _merge_optional(a.get("of"), b.get("of"))}
        if {kind_a, kind_b} == {"dict", "map"}:
            return _merge_maps(_as_map(a), _as_map(b))
        return _merge_union([a, b])
    if kind_a in ("list", "map", "json", "literal"):
        return {"t": kind_a, "of": _merge_optional(a.get("of"), b.get("of"))}
    if kind_a == "dict":
        return _merge_dicts(a, b)
    return a


def _merge_optional(a: Shape | None, b: Shape | None) -> Shape | None:
    if a is None or b is None:
        return a if b is None else b
    return merge_shapes(a, b)


def _merge_dicts(a: Shape, b: Shape) -> Shape:
    keys_a: dict[str, Shape] = a["keys"]
    keys_b: dict[str, Shape] = b["keys"]
    names = list(keys_a) + [name for name in keys_b if name not in keys_a]
    if len(names) > MAX_KEYS:
        return _merge_maps(_as_map(a), _as_map(b))
    keys: dict[str, Shape] = {}
    for name in names:
        left, right = keys_a.get(name), keys_b.get(name)
        merged = _merge_optional(left, right)
        keys[name] = merged if merged is not None else dict(_ANY)
    optional = set(a.get("opt", [])) | set(b.get("opt", []))
    optional |= set(keys_a).symmetric_difference(keys_b)
    return {"t": "dict", "keys": keys, "opt": [name for name in names if name in optional]}


def _as_map(shape: Shape) -> Shape:
    if shape.get("t") == "map":
        return shape
    of: Shape | None = None
    for item in shape.get("keys", {}).values():
        of = item if of is None else merge_shapes(of, item)
    return {"t": "map", "of": of}


def _merge_maps(a: Shape, b: Shape) -> Shape:
    return {"t": "map", "of": _merge_optional(a.get("of"), b.get("of"))}


def _options(shape: Shape) -> list[Shape]:
    return list(shape["of"]) if shape.get("t") == "union" else [shape]


def _merge_union(options: list[Shape]) -> Shape:
    merged: list[Shape] = []
    for option in options:
        for index, existing in enumerate(merged):
            if _compatible(existing, option):
                merged[index] = merge_shapes(existing, option)
                break
        else:
            merged.append(option)
    if len(merged) > MAX_UNION:
        return dict(_ANY)
    return merged[0] if len(merged) == 1 else {"t": "union", "of": merged}


def _compatible(a: Shape, b: Shape) -> bool:
    kinds = {a.get("t"), b.get("t")}
    return len(kinds) == 1 or kinds in ({"int", "float"}, {"dict", "map"}, {"json", "literal"})


def render_shape(shape: Shape, *, limit: int = RENDER_LIMIT) -> str:
    """Python-like text, e.g. ``{id: int, name: str, email?: str | None, tags: list[str]}``;
    a whole result that is text says what the text was seen to hold."""
    options = shape["of"] if shape.get("t") == "union" else [shape]
    shown = [
        "str (plain text)" if option.get("t") == "str" else _render(option)
        for option in options
        if option.get("t") != "null"
    ]
    text = " | ".join(shown + (["None"] if len(shown) < len(options) else []))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _render(shape: Shape | None) -> str:
    if shape is None:
        return "Any"
    kind = shape.get("t")
    if kind == "any":
        return "Any"
    if kind == "null":
        return "None"
    if kind == "list":
        return f"list[{_render(shape.get('of'))}]"
    if kind == "map":
        return f"dict[str, {_render(shape.get('of'))}]"
    if kind == "json":
        return f"str holding JSON {_render(shape.get('of'))} (decode with json.loads)"
    if kind == "literal":
        of = _render(shape.get("of"))
        return f"str holding a Python literal {of} (decode with ast.literal_eval)"
    if kind == "error_text":
        return "str holding an error message (errors come as ordinary text, not ToolError)"
    if kind == "union":
        options = shape["of"]
        rest = [_render(option) for option in options if option.get("t") != "null"]
        nulls = len(rest) < len(options)
        return " | ".join(rest + (["None"] if nulls else []))
    if kind == "dict":
        optional = set(shape.get("opt", []))
        fields = [
            f"{name}{'?' if name in optional else ''}: {_render(value)}"
            for name, value in shape["keys"].items()
        ]
        return "{" + ", ".join(fields) + "}"
    return str(kind)

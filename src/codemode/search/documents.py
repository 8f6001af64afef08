"""What search sees of a tool: its text split into weighted fields, plus what an answer shows."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from codemode.jsonpointer import MISSING, resolve_local_ref
from codemode.search.text import split_words, strip_markup
from codemode.tools import JSONObject, ToolSpec

__all__ = [
    "FIELDS",
    "ToolDocument",
    "first_sentence",
    "signature",
    "tool_document",
    "tool_documents",
]

# Index columns, in order. Weights live with the index (fts.py).
FIELDS = ("server", "name", "summary", "description", "params", "body", "path", "tags")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\[(])")
_SPACES = re.compile(r"\s+")
_MAX_SIGNATURE_PARAMS = 6
# A list or dict parameter shows its item shape within this many characters (else plain ``list``).
_SHAPE_CHARS = 120
_SHAPE_PROPERTIES = 6
_VERSION = re.compile(r"v\d+(\.\d+)*")


@dataclass(frozen=True, slots=True)
class ToolDocument:
    spec: ToolSpec
    module: str  # the server's Python module name: ``from servers import <module>``
    function: str  # the tool's Python function name in that module
    summary: str  # one line
    signature: str  # ``function(a: str, b: int = ...) -> dict``
    fields: tuple[str, ...]  # raw text per FIELDS entry
    # What the embedding model reads: a few views of the tool, each embedded on its own.
    semantic_texts: tuple[str, ...]
    # The product area: the first OpenAPI tag, else the first path word; "" for none.
    group: str = ""

    @property
    def semantic_text(self) -> str:
        return self.semantic_texts[0]


def first_sentence(text: str, limit: int = 160) -> str:
    """The first sentence of ``text`` without markup, at most ``limit`` characters."""
    flat = _SPACES.sub(" ", strip_markup(text)).strip()
    sentence = _SENTENCE_END.split(flat, maxsplit=1)[0] if flat else ""
    if len(sentence) > limit:
        sentence = sentence[: limit - 1].rsplit(" ", 1)[0] + "…"
    return sentence


def _resolve(schema: Any, root: JSONObject, depth: int = 0) -> JSONObject:
    """Follow a local ``$ref`` (``#/...``) once or twice; anything else is returned as is."""
    while isinstance(schema, dict) and "$ref" in schema and depth < 8:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return {}
        node = resolve_local_ref(root, ref)
        schema, depth = ({} if node is MISSING else node), depth + 1
    return schema if isinstance(schema, dict) else {}


def _properties(schema: JSONObject, root: JSONObject) -> dict[str, JSONObject]:
    schema = _resolve(schema, root)
    props: dict[str, JSONObject] = {}
    for raw in [schema, *schema.get("allOf", [])]:
        part = _resolve(raw, root)
        for key, value in (part.get("properties") or {}).items():
            props[str(key)] = _resolve(value, root)
    return props


def _nested_names(schema: JSONObject, root: JSONObject, depth: int) -> Iterator[str]:
    if depth <= 0:
        return
    schema = _resolve(schema, root)
    if schema.get("type") == "array" or "items" in schema:
        schema = _resolve(schema.get("items", {}), root)
    for name, sub in _properties(schema, root).items():
        yield name
        yield from _nested_names(sub, root, depth - 1)


def _type_hint(schema: JSONObject, root: JSONObject) -> str:
    schema = _resolve(schema, root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if "enum" in schema and kind in (None, "string"):
        return "str"
    return {
        "string": "str",
        "integer": "int",
        "number": "float",
        "boolean": "bool",
        "array": "list",
        "object": "dict",
    }.get(str(kind), "Any")


def _shape(schema: JSONObject, root: JSONObject, depth: int) -> str:
    """A compact type: ``list[{name: str, tags: list[str]}]``; objects list their properties
    (required first) ``depth`` levels down, at most ``_SHAPE_PROPERTIES`` of them."""
    schema = _resolve(schema, root)
    hint = _type_hint(schema, root)
    if hint == "list":
        items = schema.get("items")
        if not isinstance(items, dict) or depth <= 0:
            return "list"
        return f"list[{_shape(items, root, depth - 1)}]"
    props = _properties(schema, root) if depth > 0 else {}
    if hint not in ("dict", "Any") or not props:
        return hint
    required = [n for n in schema.get("required", []) if n in props]
    names = required + [n for n in props if n not in required]
    fields = [f"{n}: {_shape(props[n], root, depth - 1)}" for n in names[:_SHAPE_PROPERTIES]]
    if len(names) > _SHAPE_PROPERTIES:
        fields.append("…")
    return "{" + ", ".join(fields) + "}"


def _param_hint(schema: JSONObject, root: JSONObject) -> str:
    """The parameter's type, with the item shape of a list or dict when it fits one line."""
    hint = _type_hint(schema, root)
    if hint not in ("list", "dict", "Any"):
        return hint
    for depth in (3, 2, 1):
        shape = _shape(schema, root, depth)
        if len(shape) <= _SHAPE_CHARS:
            return shape
    return hint


def signature(spec: ToolSpec, function: str) -> str:
    """A one-line Python signature: required parameters (lists and dicts with their item
    shape), then a few optional ones, then ``...``."""
    root = spec.input_schema
    props = _properties(root, root)
    required = [n for n in root.get("required", []) if n in props]
    optional = [n for n in props if n not in required]
    shown = [f"{n}: {_param_hint(props[n], root)}" for n in required]
    room = max(0, _MAX_SIGNATURE_PARAMS - len(shown))
    shown += [f"{n}=…" for n in optional[:room]]
    if len(optional) > room:
        shown.append("…")
    return f"{function}({', '.join(shown)}) -> {_returns(spec)}"


def _returns(spec: ToolSpec) -> str:
    """The return type as the stub declares it (stubs.render): an MCP tool with no output
    schema returns its text undecoded, so ``str``."""
    if spec.output_schema:
        return _type_hint(spec.output_schema, spec.output_schema)
    return "str" if spec.source == "mcp" and not spec.decode_json else "Any"


def tool_documents(specs: Iterable[ToolSpec]) -> list[ToolDocument]:
    """Documents for ``specs``; pass a server's tools together (names are assigned per server)."""
    from codemode.search._naming import python_names  # the stub library: only when building

    specs = list(specs)
    return [
        tool_document(spec, module, function)
        for spec, (module, function) in zip(specs, python_names(specs), strict=True)
    ]


def tool_document(spec: ToolSpec, module: str, function: str) -> ToolDocument:
    root = spec.input_schema
    props = _properties(root, root)
    summary = first_sentence(spec.title or spec.description) or function.replace("_", " ")
    params_text = " ".join(f"{name} {prop.get('description', '')}" for name, prop in props.items())
    body_names = " ".join(
        name for sub in props.values() for name in _nested_names(sub, root, depth=2)
    )
    # Each word once: the upstream name, the Python name and the operation id repeat each other.
    name_text = " ".join(
        dict.fromkeys(split_words(f"{spec.name} {function} {spec.operation_id or ''}"))
    )
    path_text = spec.path or ""
    description = strip_markup(spec.description)
    tags = " ".join(spec.tags)
    fields: tuple[str, ...] = (spec.server, name_text, summary, description)
    fields += (params_text, body_names, path_text, tags)
    path_words = " ".join(w for w in split_words(path_text) if w not in ("v1", "v2", "v3"))
    detail = first_sentence(description, limit=300) if description else ""
    if detail == summary:
        detail = ""
    # Two views, averaged by the index: names and path words help on terse queries, the prose
    # view on descriptive ones (both rank better than the prose view alone: r@5 +0.025 on dev).
    # The prose view is 38% of their tokens: a new index embeds it first (``FIRST_VIEWS``).
    names_view = ". ".join(
        part for part in (summary, " ".join(split_words(function)), path_words, detail) if part
    )
    prose_view = ". ".join(part for part in (summary, detail) if part)
    return ToolDocument(
        spec=spec,
        module=module,
        function=function,
        summary=summary,
        signature=signature(spec, function),
        fields=fields,
        semantic_texts=(names_view, prose_view),
        group=_group(spec),
    )


def _group(spec: ToolSpec) -> str:
    if spec.tags:
        return spec.tags[0]
    for segment in (spec.path or "").split("/"):
        if segment and not segment.startswith("{") and not _VERSION.fullmatch(segment):
            return segment
    return ""

"""JSON Schema -> Python type hints (and the ``TypedDict`` classes they need).

One ``TypeBuilder`` serves one generated module: it collects the classes in definition order,
reuses a class when two objects have the same fields, and records which ``typing`` names the
module must import. Anything it cannot express becomes ``Any`` instead of failing. Large
schemas are bounded (nesting depth, number of classes, enum size) so a stub stays readable.
"""

from __future__ import annotations

import json
from typing import Any

from codemode.jsonpointer import MISSING, resolve_local_ref
from codemode.stubs.naming import class_name

__all__ = ["TypeBuilder", "quote", "schema_notes"]

_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
MAX_ENUM = 60
COMMENT_LIMIT = 90


class TypeBuilder:
    def __init__(
        self, *, reserved: set[str] | None = None, max_classes: int = 40, max_depth: int = 3
    ) -> None:
        self.typing_names: set[str] = set()
        self._blocks: list[str] = []
        self._taken: set[str] = set(reserved or ()) | {
            "Any",
            "Literal",
            "TypedDict",
            "Required",
            "NotRequired",
        }
        self._by_body: dict[str, str] = {}
        self._ref_names: dict[tuple[int, str], str] = {}
        self._in_progress: set[tuple[int, str]] = set()
        self._max_classes = max_classes
        self._max_depth = max_depth

    def set_budget(self, *, max_depth: int, more_classes: int) -> None:
        """Bound what follows: object nesting depth and how many more classes may be added."""
        self._max_depth = max_depth
        self._max_classes = len(self._blocks) + more_classes

    def render_classes(self) -> str:
        """The collected ``TypedDict`` classes, separated as in a module."""
        return "\n\n\n".join(self._blocks)

    def hint(self, schema: Any, *, root: Any, name: str, depth: int = 0) -> str:
        """A type expression for ``schema``; ``name`` suggests a class name for objects."""
        if schema is True or not isinstance(schema, dict) or not schema:
            return self._any()
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._ref_hint(ref, root=root, depth=depth)
        text = self._plain_hint(schema, root=root, name=name, depth=depth)
        if schema.get("nullable") is True:
            text = _union([text, "None"])
        return text

    def _any(self) -> str:
        self.typing_names.add("Any")
        return "Any"

    def _plain_hint(self, schema: dict[str, Any], *, root: Any, name: str, depth: int) -> str:
        if "const" in schema:
            return self._literal([schema["const"]]) or self._any()
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            literal = self._literal(enum) if len(enum) <= MAX_ENUM else None
            if literal:
                return literal
        for key in ("anyOf", "oneOf"):
            members = schema.get(key)
            if isinstance(members, list) and members and not _constraints_only(members):
                base = {k: v for k, v in schema.items() if k not in (key, "description", "title")}
                parts = [
                    self.hint(
                        {**base, **member} if isinstance(member, dict) and base else member,
                        root=root,
                        name=name if len(members) == 1 else f"{name}_option{i}",
                        depth=depth,
                    )
                    for i, member in enumerate(members, 1)
                ]
                return _union(parts) if "Any" not in parts else self._any()
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and all_of:
            return self._all_of_hint(schema, all_of, root=root, name=name, depth=depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            parts = [
                self._plain_hint({**schema, "type": one}, root=root, name=name, depth=depth)
                for one in kind
                if isinstance(one, str)
            ]
            return _union(parts) if parts and "Any" not in parts else self._any()
        if kind is None:
            if "properties" in schema or "additionalProperties" in schema:
                kind = "object"
            elif "items" in schema:
                kind = "array"
        if kind == "array":
            items = schema.get("items")
            item = self.hint(items, root=root, name=f"{name}_item", depth=depth)
            return f"list[{item}]"
        if kind == "object":
            return self._object_hint(schema, root=root, name=name, depth=depth)
        if kind == "string" and schema.get("format") == "binary":
            return "bytes"
        if isinstance(kind, str) and kind in _SCALARS:
            return _SCALARS[kind]
        return self._any()

    def _literal(self, values: list[Any]) -> str | None:
        parts: list[str] = []
        for value in values:
            if value is None or isinstance(value, bool | int | str):
                text = quote(value) if isinstance(value, str) else repr(value)
                if text not in parts:
                    parts.append(text)
            else:
                return None
        self.typing_names.add("Literal")
        return f"Literal[{', '.join(parts)}]"

    def _all_of_hint(
        self, schema: dict[str, Any], all_of: list[Any], *, root: Any, name: str, depth: int
    ) -> str:
        merged = _merge_objects(schema, all_of, root)
        if merged is not None:
            return self._object_hint(merged, root=root, name=name, depth=depth)
        useful = [part for part in all_of if isinstance(part, dict) and part]
        if len(useful) == 1:
            return self.hint(useful[0], root=root, name=name, depth=depth)
        return self._any()

    def _object_hint(self, schema: dict[str, Any], *, root: Any, name: str, depth: int) -> str:
        properties = schema.get("properties")
        if isinstance(properties, dict) and properties:
            if depth < self._max_depth and len(self._blocks) < self._max_classes:
                return self._typed_dict(schema, properties, root=root, name=name, depth=depth)
            return f"dict[str, {self._any()}]"
        extra = schema.get("additionalProperties")
        value = self.hint(extra, root=root, name=f"{name}_value", depth=depth + 1)
        return f"dict[str, {value}]"

    def _typed_dict(
        self,
        schema: dict[str, Any],
        properties: dict[str, Any],
        *,
        root: Any,
        name: str,
        depth: int,
        forced_name: str | None = None,
    ) -> str:
        required = {str(r) for r in schema.get("required") or [] if isinstance(r, str)}
        all_required = required >= set(properties)
        fields: list[tuple[str, str, str]] = []
        for key, prop in properties.items():
            hint = self.hint(prop, root=root, name=str(key), depth=depth + 1)
            comment = _field_comment(prop)
            fields.append((str(key), hint, comment))
        functional = any(not key.isidentifier() or _is_keyword(key) for key, _, _ in fields)
        header_total = "" if all_required else ", total=False"
        lines: list[str] = []
        doc = _first_line(schema.get("description"))
        for key, hint, comment in fields:
            wrapped = hint if all_required or key not in required else f"Required[{hint}]"
            if not all_required and key in required:
                self.typing_names.add("Required")
            if functional:
                text = quote(hint)
                value = text if all_required or key not in required else f"Required[{text}]"
                lines.append(f"        {quote(key)}: {value},{_comment_suffix(comment)}")
            else:
                lines.append(f"    {key}: {wrapped}{_comment_suffix(comment)}")
        body = "\n".join(lines)
        signature = f"{functional}|{header_total}|{doc}|{body}"
        if forced_name is None and signature in self._by_body:
            return self._by_body[signature]
        cls = forced_name or self._claim(class_name(name))
        self.typing_names.add("TypedDict")
        if functional:
            doc_line = f"# {doc}\n" if doc else ""
            total = "\n    total=False," if not all_required else ""
            block = f'{doc_line}{cls} = TypedDict(\n    "{cls}",\n    {{\n{body}\n    }},{total}\n)'
        else:
            doc_line = f"    {_docstring(doc)}\n\n" if doc else ""
            block = f"class {cls}(TypedDict{header_total}):\n{doc_line}{body}"
        self._blocks.append(block)
        self._by_body.setdefault(signature, cls)
        return cls

    def _claim(self, base: str) -> str:
        candidate, n = base, 2
        while candidate in self._taken:
            candidate, n = f"{base}{n}", n + 1
        self._taken.add(candidate)
        return candidate

    def _ref_hint(self, ref: str, *, root: Any, depth: int) -> str:
        key = (id(root), ref)
        if key in self._ref_names:
            return self._ref_names[key]
        if key in self._in_progress:
            return self._any()
        target = _pointer(root, ref)
        if not isinstance(target, dict):
            return self._any()
        label = ref.rsplit("/", 1)[-1] or "Ref"
        properties = target.get("properties")
        self._in_progress.add(key)
        try:
            if (
                isinstance(properties, dict)
                and properties
                and "anyOf" not in target
                and "oneOf" not in target
                and len(self._blocks) < self._max_classes
            ):
                # Named before its fields are rendered so that recursive refs can use the name.
                cls = self._claim(class_name(label))
                self._ref_names[key] = cls
                self._typed_dict(
                    target, properties, root=root, name=label, depth=0, forced_name=cls
                )
                return cls
            return self.hint(target, root=root, name=label, depth=depth)
        finally:
            self._in_progress.discard(key)


def quote(text: str) -> str:
    """``text`` as a double-quoted Python string literal (JSON escapes are Python escapes)."""
    return json.dumps(text)


def schema_notes(schema: Any) -> str:
    """Short facts worth a docstring line: format, default, bounds."""
    if not isinstance(schema, dict):
        return ""
    notes: list[str] = []
    if isinstance(schema.get("format"), str):
        notes.append(f"format: {schema['format']}")
    if "default" in schema:
        notes.append(f"default: {_short_json(schema['default'])}")
    enum = schema.get("enum")
    if isinstance(enum, list) and len(enum) > MAX_ENUM:
        notes.append(f"one of {len(enum)} values, e.g. {_short_json(enum[:5])}")
    for key, label in (("minimum", "min"), ("maximum", "max")):
        if isinstance(schema.get(key), int | float):
            notes.append(f"{label}: {schema[key]}")
    if schema.get("deprecated") is True:
        notes.append("deprecated")
    return "; ".join(notes)


def _merge_objects(schema: dict[str, Any], parts: list[Any], root: Any) -> dict[str, Any] | None:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for raw in [*parts, {k: v for k, v in schema.items() if k != "allOf"}]:
        part = raw
        if isinstance(part, dict) and isinstance(part.get("$ref"), str):
            part = _pointer(root, part["$ref"])
        if not isinstance(part, dict):
            return None
        if "anyOf" in part or "oneOf" in part:
            return None
        if "allOf" in part:
            inner = _merge_objects(part, part["allOf"], root)
            if inner is None:
                return None
            part = inner
        if part.get("type") not in (None, "object"):
            return None
        properties.update(part.get("properties") or {})
        required.extend(str(r) for r in part.get("required") or [] if str(r) not in required)
    if not properties:
        return None
    merged: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        merged["required"] = required
    if isinstance(schema.get("description"), str):
        merged["description"] = schema["description"]
    return merged


def _pointer(root: Any, ref: str) -> Any:
    node = resolve_local_ref(root, ref)
    return None if node is MISSING else node


def _union(parts: list[str]) -> str:
    seen: list[str] = []
    for part in parts:
        for piece in _split_union(part):
            if piece not in seen:
                seen.append(piece)
    if "None" in seen:  # None last reads best: ``str | None``
        seen.remove("None")
        seen.append("None")
    return " | ".join(seen)


def _split_union(text: str) -> list[str]:
    """Top-level ``|`` members of a hint (ignoring those inside brackets)."""
    pieces: list[str] = []
    level, start = 0, 0
    in_string: str | None = None
    for i, char in enumerate(text):
        if in_string:
            if char == in_string and text[i - 1] != "\\":
                in_string = None
        elif char in "'\"":
            in_string = char
        elif char == "[":
            level += 1
        elif char == "]":
            level -= 1
        elif char == "|" and level == 0:
            pieces.append(text[start:i].strip())
            start = i + 1
    pieces.append(text[start:].strip())
    return pieces


_SHAPE_KEYS = frozenset(
    {"type", "properties", "items", "$ref", "enum", "const", "anyOf", "oneOf", "allOf"}
)


def _constraints_only(members: list[Any]) -> bool:
    """``anyOf: [{required: [a]}, {required: [b]}]`` says which keys must be set, not a type."""
    return all(isinstance(m, dict) and not (_SHAPE_KEYS & set(m)) for m in members)


def _is_keyword(name: str) -> bool:
    import keyword

    return keyword.iskeyword(name)


def _first_line(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    line = " ".join(text.strip().split("\n", 1)[0].split())
    line = "".join(ch for ch in line if ch.isprintable())
    if len(line) > COMMENT_LIMIT:
        line = line[: COMMENT_LIMIT - 1].rsplit(" ", 1)[0] + "…"
    return line


def _field_comment(schema: Any) -> str:
    if not isinstance(schema, dict):
        return ""
    pieces = (schema_notes(schema), _first_line(schema.get("description")))
    return "; ".join(piece for piece in pieces if piece)


def _comment_suffix(comment: str) -> str:
    return f"  # {comment}" if comment else ""


def _docstring(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if escaped.endswith('"'):
        escaped += " "
    return f'"""{escaped}"""'


def _short_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."

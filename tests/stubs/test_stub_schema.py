"""JSON Schema -> type hints: each construct, and the fallbacks to Any."""

from __future__ import annotations

import pytest

from codemode.stubs.schema import TypeBuilder


def hint(schema, root=None):
    builder = TypeBuilder()
    return builder.hint(schema, root=root if root is not None else schema, name="value"), builder


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "str"),
        ({"type": "integer"}, "int"),
        ({"type": "number"}, "float"),
        ({"type": "boolean"}, "bool"),
        ({"type": "null"}, "None"),
        ({"type": "string", "format": "binary"}, "bytes"),
        ({"type": ["integer", "null"]}, "int | None"),
        ({"type": "string", "nullable": True}, "str | None"),
        ({"enum": ["a", "b"]}, 'Literal["a", "b"]'),
        ({"enum": [1.5, 2.5], "type": "number"}, "float"),
        ({"const": 3}, "Literal[3]"),
        ({"type": "array", "items": {"type": "string"}}, "list[str]"),
        ({"type": "array"}, "list[Any]"),
        ({"type": "object"}, "dict[str, Any]"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "dict[str, int]"),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "str | None"),
        ({"oneOf": [{"type": "string"}, {}]}, "Any"),
        ({}, "Any"),
        ({"not": {"type": "string"}}, "Any"),
        ({"type": "frobnicate"}, "Any"),
        ({"$ref": "#/nowhere"}, "Any"),
        ({"allOf": [{"type": "string"}]}, "str"),
    ],
)
def test_hints(schema, expected):
    text, _ = hint(schema)
    assert text == expected


def test_huge_enum_falls_back_to_its_base_type():
    text, _ = hint({"type": "string", "enum": [f"v{i}" for i in range(500)]})
    assert text == "str"


def test_identical_objects_share_one_class():
    obj = {"type": "object", "properties": {"a": {"type": "string"}}}
    builder = TypeBuilder()
    first = builder.hint(obj, root=obj, name="one")
    second = builder.hint(dict(obj), root=obj, name="two")
    assert first == second == "One"
    assert builder.render_classes().count("class ") == 1


def test_depth_and_class_budget_fall_back_to_dict():
    deep: dict = {"type": "string"}
    for level in range(6):
        deep = {"type": "object", "properties": {f"l{level}": deep}}
    builder = TypeBuilder(max_depth=2)
    builder.hint(deep, root=deep, name="deep")
    assert "dict[str, Any]" in builder.render_classes()
    assert builder.render_classes().count("class ") == 2


def test_recursive_ref_uses_the_class_name_as_forward_reference(monkeypatch):
    root = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"next": {"$ref": "#/$defs/Node"}, "v": {"type": "integer"}},
            }
        },
        "$ref": "#/$defs/Node",
    }
    text, builder = hint(root)
    assert text == "Node"
    source = builder.render_classes()
    assert "    next: Node\n" in source
    import sys
    import types
    import typing

    module = types.ModuleType("stub_schema_recursive")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec("from __future__ import annotations\nfrom typing import *\n" + source, module.__dict__)
    hints = typing.get_type_hints(module.Node)
    assert hints["v"] is int and hints["next"] is module.Node

"""Tool documents: OpenAPI tags reach the index, the views and the group of each tool."""

from __future__ import annotations

import json

from codemode.catalog.cache import spec_from_json, spec_to_json
from codemode.connectors.openapi import operations_to_specs
from codemode.search.documents import FIELDS, tool_document, tool_documents
from codemode.search.fts import FtsIndex
from codemode.tools import ToolSpec

TAGGED = {
    "openapi": "3.0.3",
    "info": {"title": "Edge", "version": "1"},
    "paths": {
        "/zones/{zone_id}/records": {
            "get": {
                "operationId": "listRecords",
                "summary": "List records",
                "tags": ["DNS Records for a Zone"],
            },
        },
        "/zones/{zone_id}/purge": {
            "post": {"operationId": "purge", "summary": "Purge cached content", "tags": ["Zone"]}
        },
        "/v2/widgets/{id}": {"get": {"operationId": "getWidget", "summary": "Get a widget"}},
    },
}


def test_openapi_tags_are_kept_and_survive_the_definition_cache():
    specs = operations_to_specs("edge", TAGGED)
    assert [s.tags for s in specs] == [("DNS Records for a Zone",), ("Zone",), ()]
    for spec in specs:
        assert spec_from_json(json.loads(json.dumps(spec_to_json(spec)))) == spec


def test_tags_are_an_indexed_field_and_name_the_group():
    listing, _purge, widget = tool_documents(operations_to_specs("edge", TAGGED))
    assert listing.fields[FIELDS.index("tags")] == "DNS Records for a Zone"
    assert listing.group == "DNS Records for a Zone"
    assert widget.group == "widgets"  # untagged: the first path word after the version
    index = FtsIndex({"tags": 1.0})
    index.add(operations_to_specs("edge", TAGGED))
    assert [h.operation_id for h in index.search("dns records", 5)] == ["listRecords"]


def test_each_tool_has_a_names_view_and_a_prose_view():
    spec = ToolSpec(
        server="s",
        name="createRecord",
        description="Create a record. It is stored for a day.",
        path="/zones/{zone_id}/records",
        method="POST",
        operation_id="createRecord",
    )
    document = tool_document(spec, "s", "create_record")
    names, prose = document.semantic_texts
    assert document.semantic_text == names
    assert "create record" in names and "zones zone id records" in names
    assert prose == "Create a record."
    assert document.group == "zones"


# server-memory's create_entities (npm @modelcontextprotocol/server-memory), as it lists it.
CREATE_ENTITIES = {
    "type": "object",
    "properties": {
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The name of the entity"},
                    "entityType": {"type": "string", "description": "The type of the entity"},
                    "observations": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["name", "entityType", "observations"],
            },
        }
    },
    "required": ["entities"],
}


def test_a_list_parameter_shows_its_item_shape_in_the_signature():
    spec = ToolSpec(server="memory", name="create_entities", input_schema=CREATE_ENTITIES)
    document = tool_document(spec, "memory", "create_entities")
    assert document.signature == (
        "create_entities(entities: list[{name: str, entityType: str, observations: list[str]}])"
        " -> str"
    )


def test_dict_shapes_follow_refs_put_required_first_and_stay_on_one_short_line():
    schema = {
        "type": "object",
        "properties": {
            "address": {"$ref": "#/$defs/address"},
            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
            "wide": {
                "type": "object",
                "properties": {f"field_{i}": {"type": "integer"} for i in range(10)},
            },
            "deep": {"type": "array", "items": {"$ref": "#/$defs/deep"}},
            "long": {"$ref": "#/$defs/deep"},
        },
        "required": ["address", "metadata", "wide", "deep", "long"],
        "$defs": {
            "address": {
                "type": "object",
                "properties": {"line2": {"type": "string"}, "city": {"type": "string"}},
                "required": ["city"],
            },
            "deep": {
                "type": "object",
                "properties": {
                    f"{'long_name_' * 3}{i}": {"type": "array", "items": {"$ref": "#/$defs/deep"}}
                    for i in range(6)
                },
            },
        },
    }
    spec = ToolSpec(server="s", name="t", input_schema=schema)
    signature = tool_document(spec, "s", "t").signature
    assert "address: {city: str, line2: str}" in signature  # required first
    assert "metadata: dict," in signature  # no properties: nothing more to show
    wide = "wide: {field_0: int, field_1: int, field_2: int, field_3: int, field_4: int, "
    assert wide + "field_5: int, …}" in signature  # at most six properties
    assert "deep: list[dict]," in signature  # the deepest shape that fits 120 characters
    assert "long: dict)" in signature  # no shape fits: the plain type
    assert "\n" not in signature


def test_the_search_signature_returns_what_the_stub_declares():
    import re

    from codemode.stubs.render import render_tool_module

    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    specs = [
        ToolSpec(server="s", name="text_tool", input_schema=schema),  # MCP text: str
        ToolSpec(server="s", name="json_tool", input_schema=schema, decode_json=True),
        ToolSpec(
            server="s",
            name="typed_tool",
            input_schema=schema,
            output_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        ),
    ]
    for spec in specs:
        stub = render_tool_module(spec, function_name=spec.name)
        declared = re.search(r"\) -> (\w+):", stub)
        assert declared is not None
        searched = tool_document(spec, "s", spec.name).signature.rsplit(" -> ", 1)[1]
        # A typed result is a TypedDict class in the stub, a dict in the one-line signature.
        expected = "dict" if spec.output_schema else declared.group(1)
        assert searched == expected, spec.name
    assert tool_document(specs[0], "s", "text_tool").signature.endswith("-> str")

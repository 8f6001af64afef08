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

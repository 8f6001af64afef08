"""Tool definitions with schemas that are hard to turn into Python (shared by the stub tests)."""

from __future__ import annotations

from codemode.tools import ToolSpec

NESTED_OBJECTS = ToolSpec(
    server="crm",
    name="update-record",
    description="Update a CRM record.\n\nOnly the given fields change.",
    input_schema={
        "type": "object",
        "properties": {
            "record-id": {"type": "string", "description": "The record to update."},
            "fields": {
                "type": "object",
                "description": "New field values.",
                "properties": {
                    "name": {"type": "string"},
                    "address": {
                        "type": "object",
                        "properties": {
                            "street": {"type": "string"},
                            "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                            "geo": {
                                "type": "object",
                                "properties": {
                                    "lat": {"type": "number"},
                                    "lon": {"type": "number"},
                                    "precision": {
                                        "type": "object",
                                        "properties": {"meters": {"type": "integer"}},
                                    },
                                },
                                "required": ["lat", "lon"],
                            },
                        },
                        "required": ["street"],
                    },
                    "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
            "dry_run": {"type": "boolean", "default": False},
        },
        "required": ["record-id", "fields"],
    },
    output_schema={
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "updated_at": {"type": "string", "format": "date-time"},
        },
        "required": ["id"],
    },
)

ENUMS_AND_UNIONS = ToolSpec(
    server="search",
    name="findItems",
    description='Find items. Quotes """ and back\\slashes must not break the docstring."',
    input_schema={
        "type": "object",
        "properties": {
            "sort": {"enum": ["asc", "desc"], "description": "Sort order."},
            "kind": {"const": "item"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
            "query": {
                "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                "description": "One term or several.",
            },
            "cursor": {"type": ["string", "null"]},
            "score": {"type": "number", "nullable": True},
            "mode": {
                "oneOf": [
                    {"type": "object", "properties": {"exact": {"type": "boolean"}}},
                    {"type": "object", "properties": {"fuzzy": {"type": "integer"}}},
                ]
            },
            "flags": {"type": "array", "items": {"enum": [1, 2, True, None]}},
            "anything": {},
        },
        "required": ["query"],
    },
)

ARRAYS_OF_OBJECTS = ToolSpec(
    server="orders",
    name="create_order",
    description="Create an order with line items.",
    input_schema={
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "description": "Line items.",
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "quantity": {"type": "integer"},
                        "options": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "name": {"type": "string"},
                                    "value": {"type": "string"},
                                },
                                "required": ["name", "value"],
                            },
                        },
                    },
                    "required": ["sku", "quantity"],
                },
            },
            "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
        },
        "required": ["items"],
    },
    output_schema={
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}},
            "required": ["sku", "quantity"],
        },
    },
)

REFS = ToolSpec(
    server="fs",
    name="write.tree",
    description="Write a directory tree.",
    input_schema={
        "type": "object",
        "$defs": {
            "Node": {
                "type": "object",
                "description": "A file or a directory.",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    "owner": {"$ref": "#/$defs/Owner"},
                },
                "required": ["name"],
            },
            "Owner": {
                "type": "object",
                "properties": {"uid": {"type": "integer"}, "gid": {"type": "integer"}},
            },
            "Mode": {"type": "string", "enum": ["overwrite", "skip"]},
            "Json": {
                "anyOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"$ref": "#/$defs/Json"}},
                ]
            },
        },
        "properties": {
            "root": {"$ref": "#/$defs/Node"},
            "mode": {"$ref": "#/$defs/Mode"},
            "meta": {"$ref": "#/$defs/Json"},
            "missing": {"$ref": "#/$defs/Nowhere"},
            "external": {"$ref": "other.json#/Thing"},
        },
        "required": ["root"],
    },
)

KEYWORD_NAMES = ToolSpec(
    server="my-api.v2",
    name="import",
    description="",
    input_schema={
        "type": "object",
        "properties": {
            "from": {"type": "string"},
            "class": {"type": "string"},
            "2fa-code": {"type": "string"},
            "dry-run": {"type": "boolean"},
            "dryRun": {"type": "boolean"},
            "lambda": {
                "type": "object",
                "properties": {
                    "def": {"type": "string"},
                    "x-trace-id": {"type": "string"},
                    "ok": {"type": "boolean"},
                },
                "required": ["def"],
            },
        },
        "required": ["from"],
    },
)

ALL_OF_AND_OUTPUT = ToolSpec(
    server="billing",
    name="GetInvoice",
    description="Get an invoice.",
    input_schema={"type": "object", "properties": {}},
    output_schema={
        "description": "The invoice.",
        "allOf": [
            {
                "type": "object",
                "properties": {"id": {"type": "string"}, "total": {"type": "integer"}},
                "required": ["id"],
            },
            {
                "type": "object",
                "properties": {
                    "lines": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"amount": {"type": "integer"}},
                        },
                    },
                    "status": {"enum": ["draft", "open", "paid"]},
                },
            },
        ],
    },
    method="GET",
    path="/invoices/{id}",
    read_only=True,
    destructive=False,
    source="openapi",
)

HARD_SPECS = {
    "nested_objects": NESTED_OBJECTS,
    "enums_and_unions": ENUMS_AND_UNIONS,
    "arrays_of_objects": ARRAYS_OF_OBJECTS,
    "refs": REFS,
    "keyword_names": KEYWORD_NAMES,
    "all_of_and_output": ALL_OF_AND_OUTPUT,
}

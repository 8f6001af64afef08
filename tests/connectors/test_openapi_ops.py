"""Operations -> ToolSpecs: names, arguments, bodies, outputs; and the three real specs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from openapi_fixture import PETSTORE

from codemode.connectors.openapi import load_spec, operations_to_specs

SPECS_DIR = Path(__file__).resolve().parents[1] / "data" / "specs"


@pytest.fixture(scope="module")
def specs():
    return {spec.name: spec for spec in operations_to_specs("pets", PETSTORE)}


def test_names_methods_and_flags(specs):
    assert list(specs) == [
        "getPet",
        "replacePet",
        "deletePet",
        "getPet_2",
        "post_pets",
        "uploadPhoto",
        "search",
        "submitForm",
    ]
    get = specs["getPet"]
    assert (get.source, get.method, get.path, get.operation_id) == (
        "openapi",
        "GET",
        "/pets/{pet-id}",
        "getPet",
    )
    assert get.read_only is True and get.destructive is False
    assert specs["deletePet"].destructive is True and specs["deletePet"].read_only is False
    assert specs["post_pets"].operation_id is None
    assert get.description == "Get a pet\n\nReturns one pet by id."
    assert get.title == "Get a pet"


def test_parameters(specs):
    schema = specs["getPet"].input_schema
    assert schema["type"] == "object"
    assert list(schema["properties"]) == ["pet-id", "fields", "X-Trace"]  # Authorization ignored
    assert schema["required"] == ["pet-id"]
    assert schema["properties"]["pet-id"]["description"] == "The pet's id."
    assert schema["properties"]["X-Trace"] == {"type": "string", "description": "Trace id."}
    listing = specs["getPet_2"].input_schema
    assert listing["required"] == ["limit"]
    assert "session" in listing["properties"]


def test_json_body_is_flattened_with_refs_and_all_of_resolved(specs):
    schema = specs["post_pets"].input_schema
    assert list(schema["properties"]) == ["name", "tag", "owner"]
    assert schema["required"] == ["name"]
    assert schema["properties"]["name"]["description"] == "Pet name."
    friends = schema["properties"]["owner"]["properties"]["friends"]
    assert friends["items"] == {}  # the recursive ref, cut after one level


def test_body_that_clashes_or_is_not_an_object_stays_whole(specs):
    search = specs["search"].input_schema
    assert list(search["properties"]) == ["name", "body"]
    assert search["properties"]["body"]["properties"]["name"] == {"type": "string"}
    upload = specs["uploadPhoto"].input_schema
    assert upload["properties"]["body"] == {"type": "string", "format": "binary"}
    assert "body" not in upload.get("required", [])


def test_output_schema_from_2xx_json(specs):
    out = specs["getPet"].output_schema
    assert out is not None and "allOf" in out
    assert specs["getPet_2"].output_schema["type"] == "array"
    assert specs["deletePet"].output_schema is None
    assert specs["post_pets"].output_schema is not None  # 201


def test_openapi_31_features():
    document = {
        "openapi": "3.1.0",
        "paths": {
            "/items/{id}": {
                "get": {
                    "parameters": [
                        {
                            "name": "id",
                            "in": "path",
                            "required": True,
                            "content": {"application/json": {"schema": {"type": "integer"}}},
                        },
                        {
                            "name": "q",
                            "in": "query",
                            "schema": {"type": ["string", "null"], "examples": ["a"]},
                        },
                    ],
                    "responses": {
                        "2XX": {
                            "description": "ok",
                            "content": {
                                "application/problem+json": {
                                    "schema": {
                                        "$ref": "#/components/schemas/Item",
                                        "description": "One item.",
                                    }
                                }
                            },
                        }
                    },
                }
            }
        },
        "components": {"schemas": {"Item": {"type": "object", "properties": {"id": {"const": 1}}}}},
    }
    (spec,) = operations_to_specs("items", document)
    assert spec.name == "get_items_id"
    assert spec.input_schema["properties"]["id"] == {"type": "integer"}
    assert spec.input_schema["properties"]["q"]["type"] == ["string", "null"]
    assert spec.output_schema == {
        "type": "object",
        "properties": {"id": {"const": 1}},
        "description": "One item.",
    }


def test_long_descriptions_are_trimmed():
    document = {
        "openapi": "3.0.0",
        "paths": {
            "/x": {"get": {"operationId": "x", "description": "Word. " * 1000, "responses": {}}}
        },
    }
    (spec,) = operations_to_specs("s", document)
    assert 100 < len(spec.description) <= 1210
    assert spec.description.endswith("…")


@pytest.mark.parametrize(
    ("filename", "count"),
    [
        ("cloudflare-openapi-2024-08-06.json.gz", 1533),
        ("github-api.github.com-octokit-openapi-23.0.2.json.gz", 1223),
        ("stripe-spec3-2023-09-12.json.gz", 468),
    ],
)
def test_real_specs_load_and_convert_quickly(filename, count):
    started = time.perf_counter()
    specs = operations_to_specs("real", load_spec(SPECS_DIR / filename))
    elapsed = time.perf_counter() - started
    assert len(specs) == count
    assert len({spec.name for spec in specs}) == count
    # A guard against pathologies (a quadratic blow-up), not a timing: about 1 s here unloaded,
    # and a loaded 2-core machine must not turn it red.
    assert elapsed < 30.0, f"{filename}: load + convert took {elapsed:.2f} s"
    for spec in specs:
        assert spec.input_schema["type"] == "object"
        assert set(spec.input_schema.get("required", [])) <= set(spec.input_schema["properties"])
        assert "$ref" not in repr(spec.input_schema)

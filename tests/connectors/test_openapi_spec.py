"""Loading OpenAPI documents (JSON, YAML, gzip, URLs) and resolving their refs."""

from __future__ import annotations

import copy
import gzip
import json

import pytest
import yaml
from openapi_fixture import PETSTORE

from codemode.connectors.openapi import load_spec
from codemode.connectors.openapi_spec import RefResolver
from codemode.errors import SchemaError


@pytest.mark.parametrize("fmt", ["json", "yaml", "json.gz", "yaml.gz"])
def test_load_formats(tmp_path, fmt):
    text = json.dumps(PETSTORE) if fmt.startswith("json") else yaml.safe_dump(PETSTORE)
    data = text.encode()
    path = tmp_path / f"spec.{fmt}"
    path.write_bytes(gzip.compress(data) if fmt.endswith(".gz") else data)
    assert load_spec(path) == PETSTORE
    assert load_spec(str(path)) == PETSTORE


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"key: [unclosed", "neither valid JSON nor valid YAML"),
        (b"- a\n- b\n", "not a JSON/YAML object"),
        (b'{"swagger": "2.0", "paths": {}}', "swagger: 2.0"),
        (b'{"info": {}}', "no 'openapi' key"),
        (b"\x1f\x8b\x08\x00broken", "cannot be decompressed"),
    ],
)
def test_bad_files_raise_schema_error(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(SchemaError, match=message) as info:
        load_spec(path)
    assert str(path) in str(info.value)
    assert info.value.fix


def test_missing_file(tmp_path):
    with pytest.raises(SchemaError, match="cannot read OpenAPI spec"):
        load_spec(tmp_path / "nope.yaml")


def test_recursive_ref_is_expanded_one_level():
    resolver = RefResolver(PETSTORE)
    person = resolver.resolve({"$ref": "#/components/schemas/Person"})
    friend = person["properties"]["friends"]["items"]
    assert friend == {}  # the recursive ref, cut after one level
    assert "x-internal" not in resolver.resolve({"$ref": "#/components/schemas/NewPet"})


def test_resolution_does_not_mutate_the_document():
    document = copy.deepcopy(PETSTORE)
    RefResolver(document).resolve(document["paths"])
    assert document == PETSTORE


def test_highly_connected_refs_are_bounded_by_depth():
    schemas = {
        f"S{i}": {
            "type": "object",
            "properties": {f"p{j}": {"$ref": f"#/components/schemas/S{j}"} for j in range(12)},
        }
        for i in range(12)
    }
    document = {"components": {"schemas": schemas}}
    resolved = RefResolver(document, max_depth=3).resolve({"$ref": "#/components/schemas/S0"})
    leaf = resolved["properties"]["p1"]["properties"]["p2"]["properties"]["p3"]
    assert leaf == {}


def test_bad_refs():
    resolver = RefResolver(PETSTORE)
    with pytest.raises(SchemaError, match="points nowhere"):
        resolver.resolve({"$ref": "#/components/schemas/Nope"})
    with pytest.raises(SchemaError, match="external"):
        resolver.resolve({"$ref": "other.yaml#/X"})

"""The three real OpenAPI specs as ToolSpecs, converted once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.connectors.openapi import load_spec, operations_to_specs
from codemode.tools import ToolSpec

SPECS_DIR = Path(__file__).resolve().parents[1] / "data" / "specs"
REAL_SPECS = {
    "cloudflare": "cloudflare-openapi-2024-08-06.json.gz",
    "github": "github-api.github.com-octokit-openapi-23.0.2.json.gz",
    "stripe": "stripe-spec3-2023-09-12.json.gz",
}


@pytest.fixture(scope="session")
def real_specs() -> list[ToolSpec]:
    specs: list[ToolSpec] = []
    for server, filename in REAL_SPECS.items():
        path = SPECS_DIR / filename
        if not path.is_file():
            pytest.fail(
                f"{path} is missing: the real specs are tracked in tests/data/specs (see its README)"
            )
        specs.extend(operations_to_specs(server, load_spec(path)))
    return specs

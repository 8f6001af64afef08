"""Fixtures for search tests: the real specs as ToolSpecs, a tiny OpenAPI file, and the rule for
tests that need the optional embedding model.

Tests marked ``needs_model`` run whenever the model is installed. Without it (a plain install
without the ``semantic`` extra) they are reported as skipped, never as passed; and where the
model is expected (``make test`` installs it and sets ``CODEMODE_EXPECT_MODEL=1``) a missing
model fails them instead, so a broken setup cannot hide behind skips.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from codemode.search.encoder import INSTALL_HINT, semantic_available
from codemode.tools import ToolSpec

SPECS = Path(__file__).resolve().parents[1] / "data" / "specs"
STRIPE = SPECS / "stripe-spec3-2023-09-12.json.gz"
REAL_SPECS = (
    SPECS / "cloudflare-openapi-2024-08-06.json.gz",
    SPECS / "github-api.github.com-octokit-openapi-23.0.2.json.gz",
    STRIPE,
)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if item.get_closest_marker("needs_model") is None or semantic_available():
        return
    if os.environ.get("CODEMODE_EXPECT_MODEL") == "1":
        pytest.fail(f"CODEMODE_EXPECT_MODEL=1 but the embedding model is missing: {INSTALL_HINT}")
    pytest.skip(f"optional embedding model not installed ({INSTALL_HINT})")


TINY_SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "Shop", "version": "1"},
    "servers": [{"url": "https://shop.example"}],
    "paths": {
        "/customers": {
            "get": {"operationId": "listCustomers", "summary": "List customers"},
            "post": {
                "operationId": "createCustomer",
                "summary": "Create a customer",
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "email": {"type": "string", "description": "Email address"},
                                    "name": {"type": "string"},
                                },
                                "required": ["email"],
                            }
                        }
                    }
                },
            },
        },
        "/customers/{id}": {
            "delete": {
                "operationId": "deleteCustomer",
                "summary": "Delete a customer",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
            }
        },
        "/charges/{id}/refund": {
            "post": {
                "operationId": "refundCharge",
                "summary": "Refund a charge",
                "description": "Gives the money of a charge back to the customer.",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
            }
        },
        "/invoices": {"get": {"operationId": "listInvoices", "summary": "List invoices"}},
    },
}


@pytest.fixture(scope="session")
def stripe_specs() -> list[ToolSpec]:
    from codemode.connectors.openapi import load_spec, operations_to_specs

    if not STRIPE.is_file():
        pytest.fail(f"{STRIPE} is missing: the real specs are tracked in tests/data/specs")
    return operations_to_specs("stripe", load_spec(STRIPE))


@pytest.fixture(scope="session")
def real_specs() -> dict[str, list[ToolSpec]]:
    """The three real specs, by spec key, each as the server the CLI would name it."""
    from codemode.catalog.loading import server_name_for_spec
    from codemode.connectors.openapi import load_spec, operations_to_specs

    out = {}
    for path in REAL_SPECS:
        if not path.is_file():
            pytest.fail(f"{path} is missing: the real specs are test data in tests/data/specs")
        out[path.name.split("-")[0]] = operations_to_specs(
            server_name_for_spec(path), load_spec(path)
        )
    return out


@pytest.fixture
def tiny_spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-shop.json"
    path.write_text(json.dumps(TINY_SPEC))
    return path


@pytest.fixture
def tiny_specs(tiny_spec_file: Path) -> list[ToolSpec]:
    from codemode.connectors.openapi import load_spec, operations_to_specs

    return operations_to_specs("shop", load_spec(tiny_spec_file))


@pytest.fixture
def np():
    """numpy, imported only by the tests that use it (it comes with the optional extras)."""
    import numpy

    return numpy


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path, monkeypatch):
    """Every search test keeps its caches (stored indexes, embeddings) in its own directory."""
    monkeypatch.setenv("CODEMODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CODEMODE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "cache"


@pytest.fixture
def require_onnxruntime():
    """Skip without onnxruntime, or fail where ``make test`` expects it (the semantic extra)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        if os.environ.get("CODEMODE_EXPECT_MODEL") == "1":
            pytest.fail(
                "CODEMODE_EXPECT_MODEL=1 but onnxruntime is missing: pip install -e '.[semantic]'"
            )
        pytest.skip("onnxruntime not installed (pip install -e '.[semantic]')")


@pytest.fixture
def prepared_dir() -> Callable[[Path], Path]:
    """Finds the one prepared-weights directory the encoder made under a cache directory."""

    def find(cache: Path) -> Path:
        (prepared,) = (cache / "models").glob("all-MiniLM-L6-v2-weights-*")
        return prepared

    return find


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache directory per test module for the encoders it builds (prepared weights, graphs)."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def fresh_onnx_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ONNX Runtime backend warns once per process; each test starts with none said."""
    from codemode.search import onnx_backend

    monkeypatch.setattr(onnx_backend, "_warned", [])
    monkeypatch.setattr(onnx_backend, "_warned_int8", [])
    monkeypatch.setattr(onnx_backend, "_warned_documents", [])

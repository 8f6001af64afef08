"""Fixtures for search tests: the real Stripe spec as ToolSpecs, and a tiny OpenAPI file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemode.tools import ToolSpec

SPECS = Path(__file__).resolve().parents[1] / "data" / "specs"
STRIPE = SPECS / "stripe-spec3-2023-09-12.json.gz"

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


@pytest.fixture
def tiny_spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-shop.json"
    path.write_text(json.dumps(TINY_SPEC))
    return path


@pytest.fixture
def tiny_specs(tiny_spec_file: Path) -> list[ToolSpec]:
    from codemode.connectors.openapi import load_spec, operations_to_specs

    return operations_to_specs("shop", load_spec(tiny_spec_file))

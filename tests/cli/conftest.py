"""A small OpenAPI spec (one operation, an unreachable server) for commands that load a catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PETS_SPEC = {
    "openapi": "3.0.0",
    "info": {"title": "Pets", "version": "1"},
    "servers": [{"url": "http://127.0.0.1:9"}],
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "summary": "List pets",
                "responses": {"200": {"description": "ok"}},
            }
        }
    },
}


@pytest.fixture
def pets_spec(tmp_path: Path) -> Path:
    """``pets.json``: its server is named ``pets``; one tool, ``list_pets``."""
    path = tmp_path / "pets.json"
    path.write_text(json.dumps(PETS_SPEC), encoding="utf-8")
    return path

"""Shared fixtures: the asyncio backend for anyio tests and the third-party MCP servers."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NODE_BIN = ROOT / "third_party" / "node_modules" / ".bin"
PYPI_VENVS = ROOT / ".third_party"

# server name -> argv that starts it over stdio (extra args are appended by the caller)
THIRD_PARTY = {
    "everything": [str(NODE_BIN / "mcp-server-everything")],
    "filesystem": [str(NODE_BIN / "mcp-server-filesystem")],
    "memory": [str(NODE_BIN / "mcp-server-memory")],
    "inspector": [str(NODE_BIN / "mcp-inspector")],
    "git": [str(PYPI_VENVS / "mcp-server-git" / "bin" / "mcp-server-git")],
    "time": [str(PYPI_VENVS / "mcp-server-time" / "bin" / "mcp-server-time")],
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def third_party_server() -> Callable[[str], list[str]]:
    """``third_party_server("memory")`` -> the argv of that server; fails if not installed."""

    def command(name: str) -> list[str]:
        argv = THIRD_PARTY[name]
        if not os.access(argv[0], os.X_OK):
            pytest.fail(f"{argv[0]} is missing: run `make third-party` first")
        return list(argv)

    return command

"""Everyday requests over real third-party MCP servers: the default first answer names the
function they need (head or tail), and a list parameter's signature shows its item shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.mcp import MCPConnector, StdioTarget
from codemode.engine import Codemode
from codemode.sandbox.inprocess import InProcessSandboxes

# Lexical search alone finds nothing for "remember that Dana prefers email" (no word matches).
pytestmark = [pytest.mark.anyio, pytest.mark.thirdparty, pytest.mark.needs_model]

# request -> functions that do it (any one)
REQUESTS = {
    "remember that Dana prefers email": {"memory.create_entities", "memory.add_observations"},
    "what changed in the repo lately": {"git.git_log", "git.git_diff"},
    "save these notes to a file": {"filesystem.write_file"},
    "forget everything about Dana": {"memory.delete_entities", "memory.delete_observations"},
}


def stdio(name: str, argv: list[str], **kwargs: object) -> MCPConnector:
    return MCPConnector(name, StdioTarget(argv[0], argv[1:], **kwargs), start_timeout_s=30)


async def test_the_first_answer_names_what_everyday_requests_need(
    third_party_server, tmp_path: Path
) -> None:
    connectors = [
        stdio(
            "memory",
            third_party_server("memory"),
            env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
        ),
        stdio("git", third_party_server("git")),
        stdio("filesystem", [*third_party_server("filesystem"), str(tmp_path)]),
        stdio("everything", third_party_server("everything")),
    ]
    engine = Codemode(
        CodemodeConfig(servers={}),
        catalog=Catalog(connectors),
        sandboxes=InProcessSandboxes(),
        semantic=True,
    )
    async with engine:
        await engine.build_search_index()
        for request, wanted in REQUESTS.items():
            answer = await engine.search(request)
            named = {hit["python_name"] for hit in answer.hits} | set(answer.more)
            assert wanted & named, (request, answer.text)
            for name in named:  # what the structured content names, the text names
                assert f"{name}(" in answer.text or name.split(".")[1] in answer.text
        entities = await engine.search("memory.create_entities")
    assert (
        "memory.create_entities(entities: list[{name: str, entityType: str, "
        "observations: list[str]}])" in entities.text
    )

"""``codemode search QUERY`` prints exactly the text the MCP ``search`` tool returns for the same
query and defaults: the gateway's server reached with the official MCP client, the CLI run as a
command (through the engine the first time, from the stored index after)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from mcp import Client

from codemode.catalog.loading import server_name_for_spec
from codemode.cli import search_command
from codemode.config import CodemodeConfig
from codemode.engine import Codemode
from codemode.gateway.server import build_server
from codemode.sandbox.inprocess import InProcessSandboxes
from codemode.tokens import count_tokens

pytestmark = pytest.mark.anyio

STRIPE = Path(__file__).resolve().parents[1] / "data" / "specs" / "stripe-spec3-2023-09-12.json.gz"


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no codemode.toml here: only --openapi specs count
    monkeypatch.setenv("CODEMODE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("CODEMODE_SEARCH_DAEMON", "0")


async def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The command's output (run in a thread: its engine path starts its own event loop)."""
    parser = argparse.ArgumentParser()
    search_command.add_arguments(parser)
    args = parser.parse_args(argv)
    assert await anyio.to_thread.run_sync(search_command.run, args) == 0
    out = capsys.readouterr().out
    assert out.endswith("\n")
    return out[:-1]


async def mcp_search(spec: Path, semantic: bool | None, arguments: dict[str, Any]) -> Any:
    engine = Codemode(
        CodemodeConfig(servers={}),
        openapi_specs=[spec],
        sandboxes=InProcessSandboxes(),
        semantic=semantic,
    )
    async with engine:
        await engine.build_search_index()  # answers are lexical-only and say so until then
        async with Client(build_server(engine)) as client:
            result = await client.call_tool("search", arguments)
    assert not result.is_error, result.content
    return result


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


@pytest.mark.parametrize(
    "semantic", [pytest.param(True, marks=pytest.mark.needs_model), pytest.param(False)]
)
async def test_the_cli_prints_what_the_search_tool_returns(tiny_spec_file, capsys, semantic):
    query = "give the customer their money back"
    result = await mcp_search(tiny_spec_file, None if semantic else False, {"query": query})
    text = text_of(result)
    flags = [] if semantic else ["--no-semantic"]
    argv = [query, "--openapi", str(tiny_spec_file), *flags]
    # Through the engine (no stored index for these inputs yet), then from the stored index.
    assert await cli(argv, capsys) == text
    assert await cli(argv, capsys) == text
    # The default answer: a few with signatures, the rest of the tiny catalog named below.
    lines = text.splitlines()
    assert lines[0] == "from servers import tiny_shop"
    assert lines[7] == 'More candidates (search("module.function") shows one):'
    assert lines[8].startswith("tiny_shop: ") and len(lines) == 9
    data = result.structured_content
    assert len(data["hits"]) == 3
    assert data["more"] == {"tiny_shop": lines[8][len("tiny_shop: ") :].split(", ")}


async def test_a_long_function_comes_in_parts_through_the_gateway_and_the_cli(capsys):
    module = server_name_for_spec(STRIPE)
    name = f"{module}.post_refunds"
    texts = []
    for part in (1, 2):
        result = await mcp_search(STRIPE, False, {"query": name, "detail": "full", "part": part})
        texts.append(text_of(result))
        argv = [name, "--openapi", str(STRIPE), "--no-semantic", "--detail", "full"]
        assert await cli([*argv, "--part", str(part)], capsys) == texts[-1]
    first, second = texts
    assert count_tokens(first) <= 800 and count_tokens(second) <= 800
    assert "def post_refunds(" in first
    assert first.endswith(f'search("{name}", detail="full", part=2) shows the rest')
    assert "def post_refunds(" not in second and "class " in second


async def test_a_part_that_is_not_a_positive_integer_is_refused(tiny_spec_file):
    engine = Codemode(
        CodemodeConfig(servers={}),
        openapi_specs=[tiny_spec_file],
        sandboxes=InProcessSandboxes(),
        semantic=False,
    )
    async with engine, Client(build_server(engine)) as client:
        result = await client.call_tool("search", {"query": "refund", "part": 0})
    assert result.is_error
    assert "`part` must be a positive integer" in text_of(result)

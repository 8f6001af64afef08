"""``codemode search QUERY`` prints exactly what the gateway's ``search`` tool returns for the same
query, config and defaults: `codemode serve` reached with the official MCP client, beside the
command run as a process (through the engine the first time, from the stored index after)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.demo import server_commands

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parents[2] / "src"
QUERIES = ("read a meeting transcript document", "write down what a lead told us")


@pytest.fixture(scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory, harness: Any) -> AsyncIterator[Any]:
    root = tmp_path_factory.mktemp("gateway-search")
    demo = server_commands(root / "data")
    config = harness.write_config(root, {"docs": demo["docs"], "crm": demo["crm"]}, pool_size=1)
    dirs = harness.GatewayDirs(root, config, root / "data", root, root / "memory.jsonl")
    async with harness.open_gateway("stdio", dirs) as opened:
        yield opened


def codemode_search(gateway: Any, query: str) -> str:
    # This checkout's code, as the gateway runs it; no search daemon left behind.
    path = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path, CODEMODE_SEARCH_DAEMON="0")
    done = subprocess.run(
        [sys.executable, "-m", "codemode", "search", "--config", str(gateway.dirs.config), query],
        cwd=gateway.dirs.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_codemode_search_prints_what_the_search_tool_returns(
    gateway: Any, harness: Any
) -> None:
    for query in (*QUERIES, QUERIES[0]):  # the first through the engine, then the stored index
        result = await harness.search_when_indexed(gateway.client, {"query": query})
        text = harness.text_of(result)
        assert "More candidates" in text  # the default answer, with its tail
        assert codemode_search(gateway, query) == text + "\n"

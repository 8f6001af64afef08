"""Elicited approvals with two gateway replicas sharing a store: while the person decides on
replica A, the model's ``approve`` on replica B is refused; the call runs exactly once.

Two engines in one process (as tests/replicas does) behind two MCP servers, reached with the
official Python client in both protocols (2026 rounds; 2025 back-channel).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, types

from codemode.catalog.catalog import Catalog
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.gateway.server import build_server
from tests.replicas.conftest import Crm, replica_config

pytestmark = pytest.mark.anyio

CODE = "from servers import crm\nprint(crm.place_order(item='book')['number'])\n"


@pytest.fixture
async def replicas(redis_server: Any, tmp_path: Path) -> AsyncIterator[tuple[Crm, Any, Any]]:
    crm = Crm()
    engines = [
        Codemode(
            replica_config(tmp_path, name, redis_server.url),
            catalog=Catalog([PythonConnector("crm", crm.functions())]),
            semantic=False,
        )
        for name in ("a", "b")
    ]
    async with engines[0] as a, engines[1] as b:
        yield crm, build_server(a), build_server(b)


def approval_id_in(message: str) -> str:
    return next(line.split()[-1] for line in message.splitlines() if line.startswith("Approval:"))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_model_cannot_approve_on_another_replica_and_the_call_runs_once(
    replicas: tuple[Crm, Any, Any], mode: str
) -> None:
    crm, server_a, server_b = replicas
    refusals: list[types.CallToolResult] = []

    async with Client(server_b, mode=mode) as model_on_b:

        async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            assert isinstance(params, types.ElicitRequestFormParams)
            answer = {"approval": approval_id_in(params.message), "allow": True}
            refusals.append(await model_on_b.call_tool("approve", answer))
            assert crm.orders == []  # nothing ran on B's say-so
            return types.ElicitResult(action="accept", content={"decision": "allow_call"})

        async with Client(server_a, mode=mode, elicitation_callback=person) as client:
            result = await client.call_tool("execute", {"code": CODE})
        late = await model_on_b.call_tool("approve", {"approval": "ap_unknown", "allow": True})

    assert result.structured_content is not None
    assert result.structured_content["stdout"] == "1\n", result.content
    assert crm.orders == [{"item": "book"}]  # exactly once
    assert len(refusals) == 1 and refusals[0].is_error
    assert "being decided by the user" in str(refusals[0].content[0])
    assert late.is_error

"""End to end through the official MCP client and a real `codemode serve` over stdio: a probe
spread over executions without a handle (each a session of its own, with its own vault) adds
up as it would in one session, and is paused before a tenth of the address shows."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.conftest import client_for, execute, stdio_target, write_config

pytestmark = pytest.mark.anyio
SERVER = str(Path(__file__).with_name("customers_server.py"))
# jordan.blake@acme.example.com: the code saw "Jordan Blake" in clear, so the places of the
# name show nothing hidden; "acme" begins at place 13.
PROBE = """from servers import customers
customers.read_query(query='SELECT id, name, email FROM customers')
known = ''
for place in {places}:
    for c in 'abcdefghijklmnopqrstuvwxyz0123456789.-':
        if customers.email_matches(customer_id=1, pattern='_' * place + c + '%')['matches']:
            known += c
            break
print(known)
"""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    root = tmp_path_factory.mktemp("probe-sessions")
    upstreams = {"customers": [sys.executable, SERVER, "customers"]}
    config = write_config(root, upstreams, pool_size=1)
    async with client_for(stdio_target(config)) as client:
        yield client


async def test_a_probe_continued_in_a_new_session_is_paused(client: Any) -> None:
    first = await execute(client, PROBE.format(places=[13, 14]))
    assert first["status"] == "ok" and first["stdout"] == "ac\n", first["text"]
    # A new session (no handle) with its own vault: the address has a token of its own there,
    # but the guesses continue the same value's.
    second = await execute(client, PROBE.format(places=[15]))
    assert second["status"] == "approval_required", second["text"]
    approval = second["approval"]
    assert approval["tool"] == "customers.email_matches"
    assert approval["arguments"]["pattern"] == "_" * 15 + "m%"
    assert "growing what earlier searches showed" in approval["reason"]
    denied = await client.call_tool("approve", {"approval": approval["id"], "allow": False})
    assert denied.structured_content["status"] == "error"

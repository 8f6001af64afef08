"""An engine over the shop tools and real bubblewrap sandboxes, with the embedded state store
or a real Redis-compatible server, and helpers to reach it through the official MCP client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.gateway.server import build_server
from codemode.sandbox import Limits, SandboxSettings
from codemode.settings.state import StateSettings


@pytest.fixture(params=["embedded", "redis"])
def skills_config(request: pytest.FixtureRequest, tmp_path: Path) -> CodemodeConfig:
    state = StateSettings()
    if request.param == "redis":
        state = StateSettings(redis_url=request.getfixturevalue("redis_server").url)
    return CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=20, cpu_time_s=3), pool_size=1),
        gateway=GatewaySettings(state_dir=tmp_path / "state"),
        state=state,
    )


@pytest.fixture
def make_engine(shop: Any, skills_config: CodemodeConfig) -> Callable[[], Codemode]:
    """A new engine over the same state directory each call (a gateway restart)."""
    connector = PythonConnector("shop", shop.functions())

    def make() -> Codemode:
        return Codemode(skills_config, catalog=Catalog([connector]), semantic=False, audit=False)

    return make


@pytest.fixture
async def engine(make_engine: Callable[[], Codemode]) -> AsyncIterator[Codemode]:
    async with make_engine() as started:
        yield started


class Gateway:
    """The gateway's ``search`` and ``execute`` through the official MCP client."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def execute(self, code: str, session: str | None = None) -> dict[str, Any]:
        arguments: dict[str, Any] = {"code": code}
        if session is not None:
            arguments["session"] = session
        result = await self.client.call_tool("execute", arguments)
        assert result.structured_content is not None, result
        return dict(result.structured_content)

    async def search(self, query: str) -> tuple[str, list[dict[str, Any]]]:
        result = await self.client.call_tool("search", {"query": query, "limit": 3})
        assert result.structured_content is not None and not result.is_error, result
        text = result.content[0].text  # type: ignore[union-attr]
        return text, list(result.structured_content["hits"])


@pytest.fixture
async def gateway(engine: Codemode) -> AsyncIterator[Gateway]:
    async with Client(build_server(engine)) as client:
        yield Gateway(client)


@pytest.fixture
def gateway_factory() -> type[Gateway]:
    return Gateway

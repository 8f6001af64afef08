"""An engine over in-process Python tools and the real bubblewrap sandbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.sandbox import Limits, SandboxSettings


@pytest.fixture
def engine_config() -> CodemodeConfig:
    return CodemodeConfig(
        servers={}, sandbox=SandboxSettings(limits=Limits(wall_time_s=10), pool_size=1)
    )


@pytest.fixture
async def engine(shop: Any, engine_config: CodemodeConfig) -> AsyncIterator[Codemode]:
    catalog = Catalog([PythonConnector("shop", shop.functions())])
    async with Codemode(engine_config, catalog=catalog, semantic=False) as engine:
        yield engine

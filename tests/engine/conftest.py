"""An engine over in-process Python tools and the real bubblewrap sandbox."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.sandbox import Limits, SandboxSettings


class Shop:
    """A tiny stateful upstream: every side effect is recorded."""

    def __init__(self) -> None:
        self.orders: list[dict[str, Any]] = []

    def functions(self) -> list[Callable[..., Any]]:
        def list_items() -> list[str]:
            """List the items for sale."""
            return ["apple", "pear"]

        def place_order(item: str, quantity: int) -> dict[str, Any]:
            """Place an order (a side effect)."""
            order = {"item": item, "quantity": quantity, "number": len(self.orders) + 1}
            self.orders.append(order)
            return order

        return [list_items, place_order]


@pytest.fixture
def shop() -> Shop:
    return Shop()


@pytest.fixture
def engine_config() -> CodemodeConfig:
    return CodemodeConfig(
        servers={}, sandbox=SandboxSettings(limits=Limits(wall_time_s=10), pool_size=1)
    )


@pytest.fixture
async def engine(shop: Shop, engine_config: CodemodeConfig) -> AsyncIterator[Codemode]:
    catalog = Catalog([PythonConnector("shop", shop.functions())])
    async with Codemode(engine_config, catalog=catalog, semantic=False) as engine:
        yield engine

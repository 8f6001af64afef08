"""An engine over in-process Python tools and the real bubblewrap sandbox, for agent tests.

``shop.place_order`` needs approval (a policy rule), so approvals can be answered from tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.policy import PolicySettings, Rule
from codemode.sandbox import Limits, SandboxPool, SandboxSettings, make_backend
from codemode.sandbox.isolation import require_isolation


class Shop:
    """A tiny stateful upstream: every side effect is recorded."""

    def __init__(self) -> None:
        self.orders: list[dict[str, Any]] = []
        self.price_calls = 0

    def functions(self) -> list[Callable[..., Any]]:
        def list_items() -> list[dict[str, Any]]:
            """List the items for sale with their prices in cents."""
            return [{"name": "apple", "price_cents": 40}, {"name": "pear", "price_cents": 55}]

        def place_order(item: str, quantity: int) -> dict[str, Any]:
            """Place an order (a side effect that needs approval)."""
            order = {"item": item, "quantity": quantity, "number": len(self.orders) + 1}
            self.orders.append(order)
            return order

        def broken_price(item: str) -> int:
            """Always fails, like an upstream that is down."""
            raise RuntimeError(f"price service unavailable for {item}")

        return [list_items, place_order, broken_price]


@pytest.fixture
def shop() -> Shop:
    return Shop()


def agent_config(wall_time_s: float = 10) -> CodemodeConfig:
    return CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=wall_time_s), pool_size=1),
        policy=PolicySettings(
            rules=(Rule(tools=("shop.place_order",), action="ask", reason="orders cost money"),)
        ),
    )


@pytest.fixture
async def engine(shop: Shop) -> AsyncIterator[Codemode]:
    catalog = Catalog([PythonConnector("shop", shop.functions())])
    async with Codemode(agent_config(), catalog=catalog, semantic=False, audit=False) as engine:
        yield engine


@pytest.fixture
async def hostile_engine(shop: Shop) -> AsyncIterator[Codemode]:
    """For hostile answers: short limits, and isolation proven before any code runs."""
    config = agent_config(wall_time_s=3)
    backend = make_backend(config.sandbox)
    with SandboxPool(backend, 0) as probe_pool:
        sandbox = probe_pool.acquire()
        try:
            require_isolation(sandbox)
        finally:
            sandbox.kill()
    catalog = Catalog([PythonConnector("shop", shop.functions())])
    async with Codemode(
        config, catalog=catalog, backend=backend, semantic=False, audit=False
    ) as engine:
        yield engine

"""Two engines (two gateway replicas in one process, separate state directories and sandbox
pools) sharing a real Redis-compatible server, over in-process tools that record every call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.policy import PolicySettings
from codemode.sandbox import Limits, SandboxSettings

ASK_ORDERS = {
    "rules": [{"tools": ["crm.place_order"], "action": "ask", "reason": "orders cost money"}]
}


@dataclass
class Crm:
    """An upstream with side effects: every order and every mail is recorded."""

    orders: list[dict[str, Any]] = field(default_factory=list)
    mails: list[str] = field(default_factory=list)

    def functions(self) -> list[Callable[..., Any]]:
        def customer() -> dict[str, str]:
            """The customer's contact."""
            return {"name": "Ada", "email": "ada.lovelace@example.com"}

        def send_mail(to: str) -> str:
            """Send a mail."""
            self.mails.append(to)
            return "sent"

        def place_order(item: str) -> dict[str, Any]:
            """Place an order (a side effect)."""
            self.orders.append({"item": item})
            return {"item": item, "number": len(self.orders)}

        return [customer, send_mail, place_order]


@pytest.fixture
def crm() -> Crm:
    return Crm()


def replica_config(tmp_path: Path, name: str, shared_store: str | None) -> CodemodeConfig:
    return CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=20, cpu_time_s=5), pool_size=1),
        gateway=GatewaySettings(
            state_dir=tmp_path / name, shared_store=shared_store, session_lease_s=3.0
        ),
        policy=PolicySettings.model_validate(ASK_ORDERS),
    )


@pytest.fixture
async def replicas(
    redis_server: Any, crm: Crm, tmp_path: Path
) -> AsyncIterator[tuple[Codemode, Codemode]]:
    """Replicas A and B: the same tools, the same shared store, nothing else in common."""
    engines = [
        Codemode(
            replica_config(tmp_path, name, redis_server.url),
            catalog=Catalog([PythonConnector("crm", crm.functions())]),
            semantic=False,
        )
        for name in ("a", "b")
    ]
    async with engines[0] as a, engines[1] as b:
        yield a, b

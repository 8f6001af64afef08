"""A small warehouse MCP server for the agent task suite, over stdio: inventory, purchase orders
and exchange rates. The rates service fails on its first call of a run (HTTP 503, "retry"), so
tasks can test recovery from a tool that fails once. State lives in one JSON file.

    python bench_ops_server.py --state DIR
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

RATES = {"EUR": 0.92, "GBP": 0.79, "JPY": 151.2, "CHF": 0.88}
INVENTORY = [
    {"sku": "BK-100", "name": "Beacon Core kit", "on_hand": 14, "reorder_level": 20},
    {"sku": "BK-200", "name": "Beacon Insights licence", "on_hand": 120, "reorder_level": 50},
    {"sku": "BK-300", "name": "Beacon Connect gateway", "on_hand": 3, "reorder_level": 10},
    {"sku": "BK-400", "name": "Beacon Edge sensor", "on_hand": 41, "reorder_level": 40},
    {"sku": "BK-500", "name": "Edge mounting bracket", "on_hand": 0, "reorder_level": 25},
    {"sku": "BK-600", "name": "Support contract", "on_hand": 9, "reorder_level": 5},
    {"sku": "BK-700", "name": "Sensor battery pack", "on_hand": 18, "reorder_level": 30},
]


def initial_state() -> dict[str, Any]:
    return {"inventory": INVENTORY, "orders": [], "rate_calls": 0}


def build_server(state_dir: Path) -> MCPServer:
    path = state_dir / "ops.json"
    if not path.exists():
        path.write_text(json.dumps(initial_state()), encoding="utf-8")

    def load() -> dict[str, Any]:
        return json.loads(path.read_text(encoding="utf-8"))

    def save(state: dict[str, Any]) -> None:
        path.write_text(json.dumps(state, indent=1), encoding="utf-8")

    server = MCPServer("ops", instructions="Warehouse inventory, purchase orders, FX rates.")

    @server.tool()
    def list_inventory() -> dict[str, Any]:
        """Every stock item under "items": sku, name, on_hand (units in stock), reorder_level."""
        return {"items": load()["inventory"]}

    @server.tool()
    def create_purchase_order(
        sku: Annotated[str, Field(description="the item's sku, e.g. 'BK-100'")],
        quantity: Annotated[int, Field(ge=1, le=10_000)],
    ) -> dict[str, Any]:
        """Order more units of one item; returns the order with its number."""
        state = load()
        if sku not in {item["sku"] for item in state["inventory"]}:
            raise ToolError(f"unknown sku {sku!r}; list_inventory() gives the skus")
        order = {"number": len(state["orders"]) + 1, "sku": sku, "quantity": quantity}
        state["orders"].append(order)
        save(state)
        return order

    @server.tool()
    def get_exchange_rates(
        base: Annotated[str, Field(description="only 'USD' is supported")] = "USD",
    ) -> dict[str, Any]:
        """Today's exchange rates from one USD to other currencies."""
        state = load()
        state["rate_calls"] += 1
        save(state)
        if state["rate_calls"] == 1:
            raise ToolError("rates service temporarily unavailable (HTTP 503); retry the call")
        if base != "USD":
            raise ToolError("only base='USD' is supported")
        return {"base": "USD", "rates": RATES}

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--state", type=Path, required=True)
    args = parser.parse_args()
    args.state.mkdir(parents=True, exist_ok=True)
    build_server(args.state).run("stdio")


if __name__ == "__main__":
    main()

"""A customers table as an MCP server over stdio, for the privacy end-to-end tests.

    python tests/privacy/customers_server.py customers   # read_query, email_matches
    python tests/privacy/customers_server.py mail        # send (also: chat)

Sixty customers whose names share words with their addresses (``Kofi Okafor`` at
``kofi.okafor3@okafor-trading.example.org``); customer 1 is Jordan Blake at
``jordan.blake@acme.example.com``. ``email_matches`` answers whether a customer's address
matches a SQL LIKE pattern: a yes/no oracle.
"""

from __future__ import annotations

import random
import sqlite3
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False)
FIRST = ("Kofi", "Maria", "Chloe", "Liam", "Aisha", "Mateo", "Yuki", "Noah", "Amara", "Lucas")
LAST = ("Okafor", "Lopez", "Chen", "Murphy", "Khan", "Garcia", "Tanaka", "Mensah")


def customers() -> list[tuple[int, str, str]]:
    rng = random.Random(60)
    rows = [(1, "Jordan Blake", "jordan.blake@acme.example.com")]
    for number in range(2, 61):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        email = f"{first}.{last}{number}@{last}-trading.example.org".lower()
        rows.append((number, f"{first} {last}", email))
    return rows


def _database() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT)")
    db.executemany("INSERT INTO customers VALUES (?, ?, ?)", customers())
    return db


def build(role: str) -> MCPServer:
    server = MCPServer(role)
    if role in ("mail", "chat"):
        sent: list[str] = []

        def send(to: str, body: str) -> dict[str, Any]:
            """Send a message."""
            sent.append(body)
            return {"sent": len(sent)}

        server.add_tool(send, annotations=ToolAnnotations(destructive_hint=False))
        return server
    db = _database()

    def read_query(query: str) -> dict[str, Any]:
        """Run a SELECT on the customers table (id, name, email)."""
        if not query.lstrip().lower().startswith("select"):
            raise ValueError("only SELECT queries")
        cursor = db.execute(query)
        names = [column[0] for column in cursor.description]
        return {"rows": [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]}

    def email_matches(customer_id: int, pattern: str) -> dict[str, bool]:
        """Whether a customer's e-mail address matches a SQL LIKE pattern."""
        row = db.execute(
            "SELECT email LIKE ? FROM customers WHERE id = ?", (pattern, customer_id)
        ).fetchone()
        return {"matches": bool(row and row[0])}

    server.add_tool(read_query, annotations=READ_ONLY)
    server.add_tool(email_matches, annotations=READ_ONLY)
    return server


if __name__ == "__main__":
    build(sys.argv[1]).run("stdio")

"""Demo mailing tool as an MCP server over stdio: subscriber lists and an outbox.

Nothing is sent anywhere: send_email records the message in the outbox table.

    python -m codemode.demo.mail_server [--data-dir DIR]
"""

from __future__ import annotations

import datetime as dt
import secrets
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from codemode.demo._server import EMAIL, READ_ONLY, Store, serve, tool, writes
from codemode.demo.data import mail_db

__all__ = ["build_server", "main"]

ListName = Annotated[
    str,
    Field(min_length=1, max_length=100, description="mailing list name, e.g. 'newsletter'"),
]


class Subscriber(BaseModel):
    email: str
    name: str
    added: str = Field(description="ISO 8601 UTC timestamp")


class AddResult(BaseModel):
    list_name: str
    email: str
    name: str
    added: bool = Field(description="false if the address was already on the list")


class SubscriberList(BaseModel):
    list_name: str
    count: int
    subscribers: list[Subscriber]


class SendResult(BaseModel):
    message_id: str
    to: str
    queued_at: str


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_email(value: str, argument: str) -> None:
    if not EMAIL.match(value):
        raise ToolError(f"{argument} is not a valid email address such as 'name@example.com'")


def build_server(data_dir: Path) -> MCPServer:
    store = Store(mail_db(data_dir))
    server = MCPServer(
        "mail",
        instructions="A mailing tool: manage subscriber lists and send emails. "
        "Lists are created by adding their first subscriber.",
        log_level="WARNING",
    )

    @tool(server, writes(destructive=False, idempotent=True))
    def add_subscriber(
        list_name: ListName,
        email: str,
        name: Annotated[str, Field(description="the subscriber's display name")] = "",
    ) -> AddResult:
        """Add an address to a mailing list (creating the list if needed). Adding an address
        that is already there changes nothing."""
        _check_email(email, "email")
        with store.write() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO subscribers VALUES (?, ?, ?, ?)",
                (list_name, email, name, _now()),
            )
        return AddResult(
            list_name=list_name, email=email.lower(), name=name, added=cur.rowcount == 1
        )

    @tool(server, READ_ONLY)
    def list_subscribers(list_name: ListName) -> SubscriberList:
        """Every subscriber of a mailing list, in the order they were added."""
        with store.read() as db:
            rows = db.execute(
                "SELECT email, name, added FROM subscribers WHERE list_name = ? ORDER BY rowid",
                (list_name,),
            ).fetchall()
        subscribers = [Subscriber(**dict(r)) for r in rows]
        return SubscriberList(list_name=list_name, count=len(subscribers), subscribers=subscribers)

    @tool(server, writes(destructive=False, idempotent=False, open_world=True))
    def send_email(
        to: Annotated[str, Field(description="one recipient address")],
        subject: Annotated[str, Field(min_length=1, max_length=300)],
        body: str,
    ) -> SendResult:
        """Send one email (queued in the outbox). Each call sends a new message."""
        _check_email(to, "to")
        result = SendResult(message_id=f"msg_{secrets.token_hex(8)}", to=to, queued_at=_now())
        with store.write() as db:
            db.execute(
                "INSERT INTO outbox (message_id, to_addr, subject, body, queued_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (result.message_id, to, subject, body, result.queued_at),
            )
        return result

    return server


def main(argv: list[str] | None = None) -> int:
    return serve(argv, "python -m codemode.demo.mail_server", __doc__ or "", build_server)


if __name__ == "__main__":
    raise SystemExit(main())

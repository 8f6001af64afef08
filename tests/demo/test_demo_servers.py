"""The demo servers as real subprocesses over stdio, driven by the official MCP client."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from codemode.demo import ACME_LEAD_ID, MEETING_DOCUMENT_ID, server_commands
from codemode.demo.data import ensure_all

pytestmark = pytest.mark.anyio

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demo-data")
    ensure_all(path)
    return path


@asynccontextmanager
async def server(name: str, data_dir: Path) -> AsyncIterator[Client]:
    argv = server_commands(data_dir)[name]
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    with anyio.fail_after(TIMEOUT_S):
        async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:
            yield client


async def ok(client: Client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def error(client: Client, tool: str, args: dict) -> str:
    result: CallToolResult = await client.call_tool(tool, args)
    assert result.is_error
    return result.content[0].text  # type: ignore[union-attr]


async def annotations(client: Client) -> dict[str, tuple[bool | None, bool | None]]:
    tools = (await client.list_tools()).tools
    for tool in tools:
        assert tool.description and tool.output_schema, tool.name
        assert "\n" not in tool.description and "  " not in tool.description, tool.name
    return {
        t.name: (t.annotations.read_only_hint, t.annotations.destructive_hint)  # type: ignore[union-attr]
        for t in tools
    }


async def test_docs_server(data_dir):
    async with server("docs", data_dir) as docs:
        assert await annotations(docs) == {
            "list_documents": (True, False),
            "search_documents": (True, False),
            "get_document": (True, False),
            "create_document": (False, False),
        }
        hits = (await ok(docs, "search_documents", {"query": "quarterly review transcript"}))[
            "hits"
        ]
        assert hits[0]["id"] == MEETING_DOCUMENT_ID
        doc = await ok(docs, "get_document", {"document_id": MEETING_DOCUMENT_ID})
        assert set(doc) == {"id", "title", "folder", "created", "content"}
        assert len(doc["content"]) > 150_000 and doc["content"].startswith("Q3 2026")

        listing = await ok(docs, "list_documents", {"folder": "/Meetings", "limit": 3})
        assert listing["total"] >= 10 and len(listing["documents"]) == 3
        assert all(d["folder"].startswith("/Meetings") for d in listing["documents"])
        assert (await ok(docs, "list_documents", {}))["total"] >= 30

        created = await ok(
            docs,
            "create_document",
            {"title": "Zebra memo", "content": "The okapi plan.", "folder": "Notes"},
        )
        assert created["folder"] == "/Notes" and created["chars"] == 15
        hits = (await ok(docs, "search_documents", {"query": "okapi"}))["hits"]
        assert [h["id"] for h in hits] == [created["id"]]
        assert (await ok(docs, "get_document", {"document_id": created["id"]}))["content"] == (
            "The okapi plan."
        )

        assert "no document with id 'nope'" in await error(
            docs, "get_document", {"document_id": "nope"}
        )
        assert "no words" in await error(docs, "search_documents", {"query": "?!"})
        assert await error(docs, "list_documents", {"limit": 0})
        # Still serving after errors.
        assert (await ok(docs, "search_documents", {"query": "Acme proposal"}))["hits"]


async def test_crm_server(data_dir):
    async with server("crm", data_dir) as crm:
        assert await annotations(crm) == {
            "search_leads": (True, False),
            "get_lead": (True, False),
            "list_contacts": (True, False),
            "update_lead": (False, True),
            "append_note": (False, False),
            "delete_lead": (False, True),
        }
        page = await ok(crm, "search_leads", {"limit": 500})
        assert page["total"] == len(page["leads"]) == 300
        assert "notes" not in page["leads"][0]
        acme = (await ok(crm, "search_leads", {"query": "acme corp"}))["leads"]
        assert [x["id"] for x in acme] == [ACME_LEAD_ID]

        filtered = await ok(
            crm,
            "search_leads",
            {"stage": "Proposal", "industry": "logistics", "min_value": 50_000, "limit": 2},
        )
        assert filtered["total"] >= len(filtered["leads"])
        for lead in filtered["leads"]:
            assert lead["stage"] == "Proposal" and lead["industry"] == "Logistics"
            assert lead["deal_value"] >= 50_000
        second = await ok(crm, "search_leads", {"limit": 5, "offset": 5})
        assert [x["id"] for x in second["leads"]] == [x["id"] for x in page["leads"][5:10]]
        german = await ok(crm, "search_leads", {"country": "germany", "limit": 500})
        assert german["total"] > 0 and {x["country"] for x in german["leads"]} == {"Germany"}

        lead = await ok(crm, "get_lead", {"lead_id": ACME_LEAD_ID})
        assert lead["company"] == "Acme Corp" and "notes" in lead and "created" in lead

        transcript = "[00:00:03] Dana: hello\n" * 2000
        updated = await ok(
            crm, "update_lead", {"lead_id": ACME_LEAD_ID, "fields": {"notes": transcript}}
        )
        assert updated["updated_fields"] == ["notes"]
        assert updated["lead"]["notes_chars"] == len(transcript)
        assert (await ok(crm, "get_lead", {"lead_id": ACME_LEAD_ID}))["notes"] == transcript
        noted = await ok(crm, "append_note", {"lead_id": ACME_LEAD_ID, "note": "Call Jordan."})
        assert noted["notes_chars"] > len(transcript)
        assert (await ok(crm, "get_lead", {"lead_id": ACME_LEAD_ID}))["notes"].endswith(
            "Call Jordan."
        )

        contacts = await ok(crm, "list_contacts", {"query": "acme"})
        assert contacts["contacts"] == [
            {
                "lead_id": ACME_LEAD_ID,
                "name": "Jordan Blake",
                "title": "VP Operations",
                "company": "Acme Corp",
                "email": "jordan.blake@acme.example.com",
                "phone": "+31 10 555 0142",
                "country": "Netherlands",
            }
        ]
        assert (await ok(crm, "list_contacts", {"stage": "Closed Won", "limit": 500}))["total"] > 0

        assert await ok(crm, "delete_lead", {"lead_id": "LEAD-0300"}) == {
            "lead_id": "LEAD-0300",
            "deleted": True,
        }

        for tool, args in [
            ("get_lead", {"lead_id": "LEAD-9999"}),
            ("update_lead", {"lead_id": "LEAD-9999", "fields": {"stage": "Proposal"}}),
            ("append_note", {"lead_id": "LEAD-9999", "note": "x"}),
            ("delete_lead", {"lead_id": "LEAD-0300"}),
        ]:
            message = await error(crm, tool, args)
            assert "no lead with id" in message and "search_leads" in message, message
        assert "pass at least one of" in await error(
            crm, "update_lead", {"lead_id": ACME_LEAD_ID, "fields": {}}
        )
        assert "bogus" in await error(
            crm, "update_lead", {"lead_id": ACME_LEAD_ID, "fields": {"bogus": 1}}
        )
        assert "stage" in await error(crm, "search_leads", {"stage": "Won-ish"})
        assert "countries: " in await error(crm, "search_leads", {"country": "Atlantis"})
        assert "Logistics" in await error(crm, "search_leads", {"industry": "Alchemy"})
        assert (await ok(crm, "search_leads", {"limit": 500}))["total"] == 299


async def test_mail_server(data_dir):
    async with server("mail", data_dir) as mail:
        assert await annotations(mail) == {
            "add_subscriber": (False, False),
            "list_subscribers": (True, False),
            "send_email": (False, False),
        }
        assert (await ok(mail, "list_subscribers", {"list_name": "newsletter"}))["count"] == 6
        assert (await ok(mail, "list_subscribers", {"list_name": "q3"}))["count"] == 0
        args = {"list_name": "q3", "email": "Jordan.Blake@acme.example.com", "name": "Jordan"}
        assert (await ok(mail, "add_subscriber", args))["added"] is True
        again = {"list_name": "q3", "email": "jordan.blake@acme.example.com"}
        assert (await ok(mail, "add_subscriber", again))["added"] is False
        listed = await ok(mail, "list_subscribers", {"list_name": "q3"})
        assert listed["count"] == 1 and listed["subscribers"][0]["name"] == "Jordan"

        sent = await ok(
            mail,
            "send_email",
            {"to": "jordan.blake@acme.example.com", "subject": "Hi", "body": "B"},
        )
        assert sent["message_id"].startswith("msg_")
        assert "not a valid email" in await error(
            mail, "add_subscriber", {"list_name": "q3", "email": "<EMAIL_1>"}
        )
        assert "not a valid email" in await error(
            mail, "send_email", {"to": "nobody", "subject": "s", "body": "b"}
        )
    with sqlite3.connect(data_dir / "mail.sqlite") as conn:
        outbox = conn.execute("SELECT to_addr, subject, body FROM outbox").fetchall()
    assert outbox == [("jordan.blake@acme.example.com", "Hi", "B")]


async def test_concurrent_first_starts_serve_the_same_data(tmp_path):
    """Several docs servers on an empty data dir at once: one database, all of them serving."""
    contents: list[str] = []

    async def start_and_read() -> None:
        async with server("docs", tmp_path) as docs:
            doc = await ok(docs, "get_document", {"document_id": MEETING_DOCUMENT_ID})
            contents.append(doc["content"])

    async with anyio.create_task_group() as group:
        for _ in range(4):
            group.start_soon(start_and_read)
    assert len(contents) == 4 and len(set(contents)) == 1
    with sqlite3.connect(tmp_path / "docs.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM documents").fetchone()[0] >= 30


def test_help_runs_without_an_mcp_client():
    import subprocess

    for module in ("docs_server", "crm_server", "mail_server"):
        out = subprocess.run(
            [sys.executable, "-m", f"codemode.demo.{module}", "--help"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        assert "--data-dir" in out

"""Demo CRM (think Salesforce) as an MCP server over stdio: leads with contacts and deals.

python -m codemode.demo.crm_server [--data-dir DIR]
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field

from codemode.demo._server import EMAIL, READ_ONLY, Store, like_pattern, serve, tool, writes
from codemode.demo.data import crm_db
from codemode.demo.leads import INDUSTRIES

__all__ = ["build_server", "main"]

Stage = Literal[
    "Prospecting", "Qualification", "Proposal", "Negotiation", "Closed Won", "Closed Lost"
]
LeadId = Annotated[str, Field(description="lead id such as 'LEAD-0042'")]


class LeadSummary(BaseModel):
    id: str
    company: str
    contact_name: str
    title: str = Field(description="the contact's job title")
    email: str
    phone: str
    country: str
    industry: str
    stage: Stage
    deal_value: int = Field(description="expected annual deal value in USD")
    owner: str = Field(description="the sales rep who owns the lead")
    last_contact: str = Field(description="date, YYYY-MM-DD")
    notes_chars: int = Field(description="length of the notes; get_lead returns them")


class Lead(LeadSummary):
    created: str = Field(description="date, YYYY-MM-DD")
    notes: str


class LeadPage(BaseModel):
    total: int = Field(description="leads matching the filters, before limit and offset")
    offset: int
    leads: list[LeadSummary]


class LeadUpdate(BaseModel):
    """Fields to change; omitted fields keep their value."""

    model_config = ConfigDict(extra="forbid")
    company: str | None = None
    contact_name: str | None = None
    title: str | None = None
    email: str | None = None
    phone: str | None = None
    country: str | None = None
    industry: str | None = None
    stage: Stage | None = None
    deal_value: Annotated[int, Field(ge=0)] | None = None
    owner: str | None = None
    last_contact: Annotated[str, Field(description="date, YYYY-MM-DD")] | None = None
    notes: Annotated[str, Field(description="replaces all notes; see append_note")] | None = None


class UpdateResult(BaseModel):
    lead: LeadSummary
    updated_fields: list[str]


class NoteResult(BaseModel):
    lead_id: str
    notes_chars: int = Field(description="length of the notes after appending")


class DeleteResult(BaseModel):
    lead_id: str
    deleted: bool


class Contact(BaseModel):
    lead_id: str
    name: str
    title: str
    company: str
    email: str
    phone: str
    country: str


class ContactPage(BaseModel):
    total: int
    offset: int
    contacts: list[Contact]


_SUMMARY = (
    "id, company, contact_name, title, email, phone, country, industry, stage, deal_value, "
    "owner, last_contact, length(notes) AS notes_chars"
)
_SEARCHED = ("company", "contact_name", "email", "title", "owner", "notes")


def _no_lead(lead_id: str) -> ToolError:
    return ToolError(
        f"no lead with id {lead_id!r}; find ids with search_leads(query='company or name')"
    )


def _check_date(value: str) -> None:
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        raise ToolError(f"last_contact {value!r} is not a date; use YYYY-MM-DD") from None


class _Filters:
    """A WHERE clause built from fixed fragments; values are always bound parameters."""

    def __init__(self) -> None:
        self.clauses: list[str] = []
        self.params: list[Any] = []

    def add(self, clause: str, *params: Any) -> None:
        self.clauses.append(clause)
        self.params.extend(params)

    def sql(self) -> str:
        return f"WHERE {' AND '.join(self.clauses)}" if self.clauses else ""


def _filters(
    db: sqlite3.Connection,
    query: str | None,
    stage: str | None,
    industry: str | None,
    country: str | None,
) -> _Filters:
    found = _Filters()
    if query:
        pattern = like_pattern(query)
        found.add(
            "(" + " OR ".join(f"{c} LIKE ? ESCAPE '\\'" for c in _SEARCHED) + ")",
            *[pattern] * len(_SEARCHED),
        )
    if stage is not None:
        found.add("stage = ?", stage)
    if industry is not None:
        if industry.lower() not in {i.lower() for i in INDUSTRIES}:
            raise ToolError(f"unknown industry {industry!r}; use one of {', '.join(INDUSTRIES)}")
        found.add("lower(industry) = lower(?)", industry)
    if country is not None:
        known = [r[0] for r in db.execute("SELECT DISTINCT country FROM leads ORDER BY 1")]
        if country.lower() not in {c.lower() for c in known}:
            raise ToolError(f"no leads in country {country!r}; countries: {', '.join(known)}")
        found.add("lower(country) = lower(?)", country)
    return found


def build_server(data_dir: Path) -> MCPServer:
    store = Store(crm_db(data_dir))
    server = MCPServer(
        "crm",
        instructions="A sales CRM holding leads: company, contact, deal stage and value, owner "
        "and free-text notes. Find leads with search_leads, read one with get_lead.",
        log_level="WARNING",
    )

    def summary(db: sqlite3.Connection, lead_id: str) -> LeadSummary:
        row = db.execute(f"SELECT {_SUMMARY} FROM leads WHERE id = ?", (lead_id,)).fetchone()  # noqa: S608
        if row is None:
            raise _no_lead(lead_id)
        return LeadSummary(**dict(row))

    @tool(server, READ_ONLY)
    def search_leads(
        query: Annotated[
            str | None,
            Field(description="text in company, contact, email, title, owner or notes"),
        ] = None,
        *,
        stage: Stage | None = None,
        industry: Annotated[str | None, Field(description="e.g. 'Logistics', 'Retail'")] = None,
        country: Annotated[str | None, Field(description="e.g. 'Germany'")] = None,
        min_value: Annotated[int | None, Field(ge=0, description="minimum deal value, USD")] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> LeadPage:
        """Find leads matching all the given filters, ordered by id, without their notes."""
        with store.read() as db:
            found = _filters(db, query, stage, industry, country)
            if min_value is not None:
                found.add("deal_value >= ?", min_value)
            where = found.sql()
            total = db.execute(f"SELECT count(*) FROM leads {where}", found.params).fetchone()[0]  # noqa: S608
            rows = db.execute(
                f"SELECT {_SUMMARY} FROM leads {where} ORDER BY id LIMIT ? OFFSET ?",  # noqa: S608
                [*found.params, limit, offset],
            ).fetchall()
        return LeadPage(total=total, offset=offset, leads=[LeadSummary(**dict(r)) for r in rows])

    @tool(server, READ_ONLY)
    def get_lead(lead_id: LeadId) -> Lead:
        """Read one lead with all its fields, including the full notes."""
        with store.read() as db:
            row = db.execute(
                f"SELECT {_SUMMARY}, created, notes FROM leads WHERE id = ?",  # noqa: S608
                (lead_id,),
            ).fetchone()
        if row is None:
            raise _no_lead(lead_id)
        return Lead(**dict(row))

    @tool(server, writes(destructive=True, idempotent=True))
    def update_lead(lead_id: LeadId, fields: LeadUpdate) -> UpdateResult:
        """Change fields of a lead, e.g. {"stage": "Proposal"} or {"notes": "..."}.
        Setting notes replaces them; append_note adds to them instead."""
        changes = fields.model_dump(exclude_none=True)
        if not changes:
            raise ToolError(
                "fields is empty; pass at least one of " + ", ".join(LeadUpdate.model_fields)
            )
        if "email" in changes and not EMAIL.match(changes["email"]):
            raise ToolError("email is not a valid address such as 'name@example.com'")
        if "last_contact" in changes:
            _check_date(changes["last_contact"])
        if "industry" in changes and changes["industry"] not in INDUSTRIES:
            raise ToolError(f"unknown industry; use one of {', '.join(INDUSTRIES)}")
        assignments = ", ".join(f"{name} = ?" for name in changes)  # names come from LeadUpdate
        with store.write() as db:
            cur = db.execute(
                f"UPDATE leads SET {assignments} WHERE id = ?",  # noqa: S608
                [*changes.values(), lead_id],
            )
            if cur.rowcount == 0:
                raise _no_lead(lead_id)
            return UpdateResult(lead=summary(db, lead_id), updated_fields=list(changes))

    @tool(server, writes(destructive=False, idempotent=False))
    def append_note(
        lead_id: LeadId,
        note: Annotated[str, Field(min_length=1)],
    ) -> NoteResult:
        """Add a dated note at the end of a lead's notes, keeping what is there."""
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        with store.write() as db:
            cur = db.execute(
                "UPDATE leads SET notes = CASE WHEN notes = '' THEN ? ELSE notes || ? END "
                "WHERE id = ?",
                (f"[{stamp}] {note}", f"\n\n[{stamp}] {note}", lead_id),
            )
            if cur.rowcount == 0:
                raise _no_lead(lead_id)
            chars = db.execute("SELECT length(notes) FROM leads WHERE id = ?", (lead_id,))
            return NoteResult(lead_id=lead_id, notes_chars=chars.fetchone()[0])

    @tool(server, writes(destructive=True, idempotent=True))
    def delete_lead(lead_id: LeadId) -> DeleteResult:
        """Delete a lead permanently. This cannot be undone."""
        with store.write() as db:
            if db.execute("DELETE FROM leads WHERE id = ?", (lead_id,)).rowcount == 0:
                raise _no_lead(lead_id)
        return DeleteResult(lead_id=lead_id, deleted=True)

    @tool(server, READ_ONLY)
    def list_contacts(
        query: Annotated[str | None, Field(description="text in name, email or company")] = None,
        *,
        stage: Stage | None = None,
        industry: str | None = None,
        country: str | None = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 100,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> ContactPage:
        """List the contact person of each matching lead: name, title, company, email, phone."""
        with store.read() as db:
            found = _filters(db, None, stage, industry, country)
            if query:
                pattern = like_pattern(query)
                found.add(
                    "(contact_name LIKE ? ESCAPE '\\' OR email LIKE ? ESCAPE '\\' "
                    "OR company LIKE ? ESCAPE '\\')",
                    pattern,
                    pattern,
                    pattern,
                )
            where = found.sql()
            total = db.execute(f"SELECT count(*) FROM leads {where}", found.params).fetchone()[0]  # noqa: S608
            rows = db.execute(
                "SELECT id AS lead_id, contact_name AS name, title, company, email, phone, country "  # noqa: S608
                f"FROM leads {where} ORDER BY id LIMIT ? OFFSET ?",
                [*found.params, limit, offset],
            ).fetchall()
        return ContactPage(total=total, offset=offset, contacts=[Contact(**dict(r)) for r in rows])

    return server


def main(argv: list[str] | None = None) -> int:
    return serve(argv, "python -m codemode.demo.crm_server", __doc__ or "", build_server)


if __name__ == "__main__":
    raise SystemExit(main())

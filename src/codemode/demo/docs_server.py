"""Demo document store (think Google Drive) as an MCP server over stdio.

python -m codemode.demo.docs_server [--data-dir DIR]
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from codemode.demo._server import READ_ONLY, Store, serve, tool, writes
from codemode.demo.data import docs_db

__all__ = ["build_server", "main"]


class DocumentInfo(BaseModel):
    id: str
    title: str
    folder: str
    created: str = Field(description="ISO 8601 UTC timestamp")
    chars: int = Field(description="length of the content in characters")


class DocumentList(BaseModel):
    folder: str | None
    total: int = Field(description="documents matching, before the limit")
    documents: list[DocumentInfo]


class SearchHit(BaseModel):
    id: str
    title: str
    folder: str
    created: str
    snippet: str = Field(description="matching passage, matched words in [brackets]")


class SearchResults(BaseModel):
    query: str
    hits: list[SearchHit] = Field(description="best match first")


class Document(BaseModel):
    id: str
    title: str
    folder: str
    created: str
    content: str


# SQL below is built only from these constants; every value is a bound parameter.
_COLUMNS = "d.id, d.title, d.folder, d.created"
_WORD = re.compile(r"\w+")


def _folder(folder: str) -> str:
    return "/" + folder.strip().strip("/")


def _fts_query(words: list[str], operator: str) -> str:
    return f" {operator} ".join('"' + w.replace('"', "") + '"' for w in words)


def build_server(data_dir: Path) -> MCPServer:
    store = Store(docs_db(data_dir))
    server = MCPServer(
        "docs",
        instructions="A company document store: meeting notes and transcripts, proposals, "
        "policies, product docs. Find documents with search_documents or list_documents, "
        "then read one with get_document.",
        log_level="WARNING",
    )

    @tool(server, READ_ONLY)
    def list_documents(
        folder: Annotated[
            str | None, Field(description="folder path such as '/Meetings'; includes subfolders")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
    ) -> DocumentList:
        """List documents (metadata only, newest first), optionally within one folder."""
        where, params = "", []
        if folder is not None and _folder(folder) != "/":
            where = "WHERE d.folder = ? OR d.folder LIKE ? || '/%'"
            params = [_folder(folder), _folder(folder)]
        with store.read() as db:
            count_sql = f"SELECT count(*) FROM documents d {where}"  # noqa: S608
            total = db.execute(count_sql, params).fetchone()[0]
            rows = db.execute(
                f"SELECT {_COLUMNS}, length(d.content) AS chars FROM documents d {where} "  # noqa: S608
                "ORDER BY d.created DESC, d.id LIMIT ?",
                [*params, limit],
            ).fetchall()
        return DocumentList(
            folder=folder, total=total, documents=[DocumentInfo(**dict(r)) for r in rows]
        )

    @tool(server, READ_ONLY)
    def search_documents(
        query: Annotated[str, Field(description="words to look for in titles and content")],
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
    ) -> SearchResults:
        """Full-text search over titles and content, best match first. Documents containing
        all the words rank first; if none does, documents with any of them are returned."""
        words = _WORD.findall(query)
        if not words:
            raise ToolError(f"query {query!r} has no words to search for; pass e.g. 'budget'")
        sql = (
            f"SELECT {_COLUMNS}, snippet(documents_fts, 1, '[', ']', ' … ', 24) AS snippet "  # noqa: S608
            "FROM documents_fts JOIN documents d ON d.rowid = documents_fts.rowid "
            "WHERE documents_fts MATCH ? ORDER BY bm25(documents_fts, 10.0, 1.0) LIMIT ?"
        )
        with store.read() as db:
            rows = db.execute(sql, (_fts_query(words, "AND"), limit)).fetchall()
            if not rows:
                rows = db.execute(sql, (_fts_query(words, "OR"), limit)).fetchall()
        return SearchResults(query=query, hits=[SearchHit(**dict(r)) for r in rows])

    @tool(server, READ_ONLY)
    def get_document(
        document_id: Annotated[str, Field(description="id from list_documents or search")],
    ) -> Document:
        """Read one document, with its full content."""
        with store.read() as db:
            row = db.execute(
                f"SELECT {_COLUMNS}, d.content FROM documents d WHERE d.id = ?",  # noqa: S608
                (document_id,),
            ).fetchone()
        if row is None:
            raise ToolError(
                f"no document with id {document_id!r}; "
                "find ids with search_documents(query) or list_documents()"
            )
        return Document(**dict(row))

    @tool(server, writes(destructive=False, idempotent=False))
    def create_document(
        title: Annotated[str, Field(min_length=1, max_length=300)],
        content: str,
        folder: Annotated[str, Field(description="e.g. '/Meetings/2026'")] = "/Inbox",
    ) -> DocumentInfo:
        """Create a new document; returns its metadata, including the new id."""
        slug = "_".join(_WORD.findall(title.lower()))[:40].strip("_") or "untitled"
        info = DocumentInfo(
            id=f"doc_{slug}_{secrets.token_hex(3)}",
            title=title,
            folder=_folder(folder),
            created=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            chars=len(content),
        )
        with store.write() as db:
            cur = db.execute(
                "INSERT INTO documents VALUES (?, ?, ?, ?, ?)",
                (info.id, info.title, info.folder, info.created, content),
            )
            db.execute(
                "INSERT INTO documents_fts (rowid, title, content) VALUES (?, ?, ?)",
                (cur.lastrowid, title, content),
            )
        return info

    return server


def main(argv: list[str] | None = None) -> int:
    return serve(argv, "python -m codemode.demo.docs_server", __doc__ or "", build_server)


if __name__ == "__main__":
    raise SystemExit(main())

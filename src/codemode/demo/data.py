"""Sample data for the demo servers: generated once, deterministically, into SQLite files.

Each database is built in a temporary file and then hard-linked into place, which fails if the
file already exists. So when several servers start at once on an empty data directory, each may
build its own copy, but exactly one (identical) copy wins and nobody ever opens a half-written
file or has its database replaced under it.

    python -m codemode.demo.data [--data-dir DIR] [--reset]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from codemode.demo.documents import MEETING_DOCUMENT_ID, generate_documents
from codemode.demo.leads import ACME_LEAD_ID, generate_leads
from codemode.errors import UsageError

__all__ = [
    "ACME_LEAD_ID",
    "DATA_ENV",
    "DEFAULT_SEED",
    "MEETING_DOCUMENT_ID",
    "crm_db",
    "default_data_dir",
    "docs_db",
    "ensure_all",
    "mail_db",
    "open_db",
    "reset",
]

DATA_ENV = "CODEMODE_DEMO_DATA"
DEFAULT_SEED = 20261006
# Bump when generated content or schemas change; old files are then refused with a clear message.
GENERATOR_VERSION = "2"

_DOCS_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE documents (
    id TEXT PRIMARY KEY, title TEXT NOT NULL, folder TEXT NOT NULL,
    created TEXT NOT NULL, content TEXT NOT NULL
);
CREATE INDEX documents_folder ON documents (folder);
CREATE VIRTUAL TABLE documents_fts USING fts5 (
    title, content, content='documents', content_rowid='rowid', tokenize='porter unicode61'
);
"""
_CRM_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE leads (
    id TEXT PRIMARY KEY, company TEXT NOT NULL, contact_name TEXT NOT NULL, title TEXT NOT NULL,
    email TEXT NOT NULL, phone TEXT NOT NULL, country TEXT NOT NULL, industry TEXT NOT NULL,
    stage TEXT NOT NULL, deal_value INTEGER NOT NULL, owner TEXT NOT NULL,
    last_contact TEXT NOT NULL, created TEXT NOT NULL, notes TEXT NOT NULL
);
CREATE INDEX leads_stage ON leads (stage);
CREATE INDEX leads_industry ON leads (industry);
CREATE INDEX leads_country ON leads (country);
"""
_MAIL_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE subscribers (
    list_name TEXT NOT NULL, email TEXT NOT NULL COLLATE NOCASE, name TEXT NOT NULL,
    added TEXT NOT NULL,
    PRIMARY KEY (list_name, email)
);
CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT NOT NULL UNIQUE, to_addr TEXT NOT NULL,
    subject TEXT NOT NULL, body TEXT NOT NULL, queued_at TEXT NOT NULL
);
"""


def default_data_dir() -> Path:
    """`$CODEMODE_DEMO_DATA`, else `$XDG_DATA_HOME/codemode/demo` (~/.local/share by default)."""
    if env := os.environ.get(DATA_ENV):
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "codemode" / "demo"


def open_db(path: Path) -> sqlite3.Connection:
    """A connection for one request; waits up to 10 s for another writer."""
    conn = sqlite3.connect(path, timeout=10.0)
    conn.row_factory = sqlite3.Row
    return conn


def _write_meta(conn: sqlite3.Connection, seed: int) -> None:
    conn.executemany(
        "INSERT INTO meta VALUES (?, ?)",
        [("generator_version", GENERATOR_VERSION), ("seed", str(seed))],
    )


def _build_docs(conn: sqlite3.Connection, seed: int) -> None:
    conn.executescript(_DOCS_SCHEMA)
    _write_meta(conn, seed)
    for doc in generate_documents(seed, generate_leads(seed)):
        cur = conn.execute(
            "INSERT INTO documents VALUES (?, ?, ?, ?, ?)",
            (doc.id, doc.title, doc.folder, doc.created, doc.content),
        )
        conn.execute(
            "INSERT INTO documents_fts (rowid, title, content) VALUES (?, ?, ?)",
            (cur.lastrowid, doc.title, doc.content),
        )


def _build_crm(conn: sqlite3.Connection, seed: int) -> None:
    conn.executescript(_CRM_SCHEMA)
    _write_meta(conn, seed)
    conn.executemany(
        "INSERT INTO leads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (x.id, x.company, x.contact_name, x.title, x.email, x.phone, x.country, x.industry,
             x.stage, x.deal_value, x.owner, x.last_contact, x.created, x.notes)
            for x in generate_leads(seed)
        ],
    )  # fmt: skip


def _build_mail(conn: sqlite3.Connection, seed: int) -> None:
    conn.executescript(_MAIL_SCHEMA)
    _write_meta(conn, seed)
    rng = random.Random(seed + 2)
    names = ("Ada Quinn", "Bo Lindahl", "Carla Mendes", "Dev Malhotra", "Eli Novak", "Fay Osei")
    conn.executemany(
        "INSERT INTO subscribers VALUES ('newsletter', ?, ?, ?)",
        [
            (
                f"{name.lower().replace(' ', '.')}@example.net",
                name,
                f"2026-0{rng.randint(1, 9)}-{rng.randint(10, 28)}T09:00:00Z",
            )
            for name in names
        ],
    )


def _check_meta(path: Path, seed: int) -> None:
    with contextlib.closing(open_db(path)) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    expected = {"generator_version": GENERATOR_VERSION, "seed": str(seed)}
    if meta != expected:
        raise UsageError(
            f"demo database {path} was generated with {meta}, but this code expects {expected}",
            fix="delete the demo data directory or run `python -m codemode.demo.data --reset`",
        )


def _stale(path: Path, seed: int) -> bool:
    """True when ``path`` was made by another generator version (demo data is disposable)."""
    try:
        with contextlib.closing(open_db(path)) as conn:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.Error:
        return True
    return meta.get("generator_version") != GENERATOR_VERSION and meta.get("seed") == str(seed)


def _move_aside(path: Path) -> None:
    suffix = f".stale-{os.getpid()}"
    for part in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            part.replace(part.with_name(part.name + suffix))


def _materialize(path: Path, build: Callable[[sqlite3.Connection, int], None], seed: int) -> Path:
    if path.exists() and _stale(path, seed):
        _move_aside(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            with contextlib.closing(sqlite3.connect(tmp)) as conn, conn:
                build(conn, seed)
            _link_no_clobber(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    _check_meta(path, seed)
    return path


def _link_no_clobber(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except FileExistsError:
        return  # another process finished first; its file has the same contents
    except OSError:
        # No hard links on this file system: a rename is atomic but could replace a file a
        # racing process just created, so only rename when there is still nothing there.
        if not target.exists():
            source.replace(target)


def docs_db(data_dir: Path | None = None, seed: int = DEFAULT_SEED) -> Path:
    """The document store's database, generated on first use."""
    return _materialize((data_dir or default_data_dir()) / "docs.sqlite", _build_docs, seed)


def crm_db(data_dir: Path | None = None, seed: int = DEFAULT_SEED) -> Path:
    """The CRM's database, generated on first use."""
    return _materialize((data_dir or default_data_dir()) / "crm.sqlite", _build_crm, seed)


def mail_db(data_dir: Path | None = None, seed: int = DEFAULT_SEED) -> Path:
    """The mailing tool's database, generated on first use."""
    return _materialize((data_dir or default_data_dir()) / "mail.sqlite", _build_mail, seed)


def ensure_all(data_dir: Path | None = None, seed: int = DEFAULT_SEED) -> list[Path]:
    """Generate every demo database that is missing; return their paths."""
    return [make(data_dir, seed) for make in (docs_db, crm_db, mail_db)]


def _files(data_dir: Path) -> Iterator[Path]:
    for name in ("docs", "crm", "mail"):
        for suffix in ("", "-wal", "-shm", "-journal"):
            yield data_dir / f"{name}.sqlite{suffix}"


def reset(data_dir: Path | None = None) -> None:
    """Delete the demo databases (stop the demo servers first), so the next start regenerates."""
    for path in _files(data_dir or default_data_dir()):
        path.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codemode.demo.data", description=__doc__)
    parser.add_argument("--data-dir", type=Path, default=None, help="default: %(default)s")
    parser.add_argument("--reset", action="store_true", help="delete and regenerate the data")
    args = parser.parse_args(argv)
    data_dir: Path = args.data_dir or default_data_dir()
    if args.reset:
        reset(data_dir)
    for path in ensure_all(data_dir):
        sys.stdout.write(f"{path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

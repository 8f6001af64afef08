"""Lexical search: SQLite FTS5 with BM25 over weighted columns (a BM25F in spirit).

Text is split, stemmed and stripped of stopwords in Python (``search.text``) before it reaches
SQLite, so the index and the queries agree on words; FTS5 only splits on spaces and ranks.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from codemode.search.base import DEFAULT_LIMIT, Hit, hit_from_document
from codemode.search.documents import FIELDS, ToolDocument, tool_documents
from codemode.search.names import NameLookup
from codemode.search.text import expand_query, terms
from codemode.storage.private import private_file
from codemode.tools import ToolSpec

__all__ = ["DEFAULT_WEIGHTS", "FtsIndex"]

DEFAULT_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {
        "server": 1.0,
        "name": 4.0,
        "summary": 4.0,
        "description": 1.0,
        "params": 2.0,
        "body": 1.0,
        "path": 2.0,
        "tags": 2.0,
    }
)


_POOL = 200


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


class FtsIndex:
    """A ``SearchIndex`` in an in-memory SQLite database (or a stored one, see ``open``)."""

    semantic = False

    def __init__(
        self,
        weights: Mapping[str, float] = DEFAULT_WEIGHTS,
        *,
        synonyms: bool = True,
        prefix: bool = True,
        synonym_weight: float = 0.3,
        _database: sqlite3.Connection | None = None,
        _entries: Sequence[Hit] = (),
    ) -> None:
        unknown = set(weights) - set(FIELDS)
        if unknown:
            raise ValueError(f"unknown search fields {sorted(unknown)}; use some of {FIELDS}")
        self._weights = tuple(float(weights.get(name, 0.0)) for name in FIELDS)
        self._synonyms = synonyms
        self._prefix = prefix
        self.synonym_weight = synonym_weight
        self._documents: list[ToolDocument] = []
        # What a hit shows, per position (row ``i + 1``); a stored index has only these.
        self.entries: list[Hit] | Sequence[Hit] = _entries if _entries else []
        self._lock = threading.Lock()
        self._names = NameLookup()
        if _database is not None:
            self._db = _database
            return
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        columns = ", ".join(FIELDS)
        self._db.execute(
            f"CREATE VIRTUAL TABLE tools USING fts5({columns}, "
            "tokenize = 'unicode61 remove_diacritics 0', prefix = '3')"
        )

    @classmethod
    def open(cls, path: Path, entries: Sequence[Hit], **options: object) -> FtsIndex:
        """A stored index (written by ``save``), read-only, for the tools ``entries`` describe."""
        database = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
        )
        return cls(_database=database, _entries=entries, **options)  # type: ignore[arg-type]

    def save(self, path: Path) -> None:
        """Write the index to a SQLite file (replaced if it exists)."""
        path.unlink(missing_ok=True)
        private_file(path)  # empty, 0600: SQLite writes the index into it
        target = sqlite3.connect(path)
        try:
            with self._lock:
                self._db.backup(target)
        finally:
            target.close()

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def documents(self) -> list[ToolDocument]:
        """Indexed tools in insertion order (empty for a stored index: see ``entries``)."""
        return self._documents

    def add(self, specs: Iterable[ToolSpec]) -> None:
        self.add_documents(tool_documents(specs))

    def add_documents(self, documents: Iterable[ToolDocument]) -> None:
        rows: list[tuple[object, ...]] = []
        with self._lock:
            for document in documents:
                self._documents.append(document)
                assert isinstance(self.entries, list), "a stored index is read-only"
                self.entries.append(hit_from_document(document, 0.0))
                rows.append(
                    (
                        len(self.entries),
                        *(" ".join(terms(text, drop_stopwords=True)) for text in document.fields),
                    )
                )
            placeholders = ", ".join("?" * (len(FIELDS) + 1))
            self._db.executemany(  # column names are constants, values are bound
                f"INSERT INTO tools(rowid, {', '.join(FIELDS)}) VALUES ({placeholders})",  # noqa: S608
                rows,
            )
            self._db.commit()

    def match_expression(self, query: str, *, synonyms: bool = False) -> str:
        """The FTS5 MATCH expression for the query's own words, or for their synonyms."""
        options: list[str] = []
        for word, others in expand_query(query):
            if synonyms:
                options += [_quote(s) for s in others]
            else:
                options.append(_quote(word) + ("*" if self._prefix and len(word) >= 3 else ""))
        return " OR ".join(dict.fromkeys(options))

    def _bm25(self, expression: str, limit: int) -> list[tuple[int, float]]:
        if not expression:
            return []
        weights = ", ".join(repr(w) for w in self._weights)
        with self._lock:
            rows = self._db.execute(
                f"SELECT rowid, bm25(tools, {weights}) AS rank FROM tools "  # noqa: S608 (floats)
                "WHERE tools MATCH ? ORDER BY rank LIMIT ?",
                (expression, limit),
            ).fetchall()
        return [(int(rowid) - 1, -float(rank)) for rowid, rank in rows]

    def ranked(self, query: str, limit: int) -> list[tuple[int, float]]:
        """``(position, score)`` pairs, best first; scores are positive, higher is better.

        Synonyms are ranked by a second query and count ``synonym_weight`` as much as the
        query's own words: in one OR query a tool matching five synonyms of "create" would
        beat the tool that matches the user's words.
        """
        if limit <= 0:
            return []
        pool = max(limit, _POOL)
        scores = dict(self._bm25(self.match_expression(query), pool))
        if self._synonyms and self.synonym_weight > 0:
            for position, score in self._bm25(self.match_expression(query, synonyms=True), pool):
                scores[position] = scores.get(position, 0.0) + self.synonym_weight * score
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        return ranked[:limit]

    def named(self, query: str) -> list[Hit] | None:
        """The tools ``query`` names by Python name (``stripe.post_refunds``), else None."""
        with self._lock:
            return self._names.find(query, self.entries)

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[Hit]:
        if (named := self.named(query)) is not None:
            return [replace(hit, score=1.0) for hit in named[:limit]]
        return [
            replace(self.entries[position], score=score)
            for position, score in self.ranked(query, limit)
        ]

    def close(self) -> None:
        self._db.close()

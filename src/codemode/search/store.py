"""Search indexes kept on disk, one per catalog fingerprint, so a new process answers at once.

Layout under the cache directory (``default_cache_dir()``)::

    search/<fingerprint>/tools.json        what a hit shows, one entry per tool, index order
    search/<fingerprint>/lexical.sqlite    the FTS5 table (BM25)
    search/<fingerprint>/vectors-<key>.npy     tool vectors (memory-mapped on load); the key
                                           names the model and the views they average
                                           (``semantic.vectors_key``); a build
                                           stopped between its stages leaves the
                                           first stage's (the prose view) alone
    search/inputs/<key>.json               command-line inputs -> fingerprint, with the files
                                           whose size and mtime must not have changed

Writes go to a temporary name and are renamed into place, so a reader sees a whole file or none.
The store is an optimisation: every failure to read is a miss, every failure to write a warning.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import marshal
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from codemode.search.hit import Hit
from codemode.search.stored_vectors import StoredVectors, stored_vectors
from codemode.storage.private import private_dir, private_open, private_write

if TYPE_CHECKING:
    from codemode.search.arrays import FloatArray
    from codemode.tools import ToolSpec

__all__ = ["INDEX_FORMAT", "IndexStore", "catalog_fingerprint", "default_cache_dir", "file_stamp"]

log = logging.getLogger("codemode.search")

# Bump when documents, lexical columns or vector views change: old entries are then ignored.
INDEX_FORMAT = 3
# marshal from version 3 on writes an object seen twice as a back-reference, depending on
# reference counts: the same tools then hashed differently from one process to the next (the
# Cloudflare spec's shared schemas did), and no process found the index another had stored.
_MARSHAL_VERSION = 2
_HIT_FIELDS = ("server", "tool", "module", "function", "summary", "signature")
_HTTP_FIELDS = ("method", "path", "operation_id")


def default_cache_dir() -> Path:
    """``$CODEMODE_CACHE_DIR``, else ``$CODEMODE_STATE_DIR``, else ``$XDG_CACHE_HOME/codemode``,
    else ``~/.cache/codemode``."""
    for variable in ("CODEMODE_CACHE_DIR", "CODEMODE_STATE_DIR"):
        if value := os.environ.get(variable):
            return Path(value)
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg) / "codemode"
    return Path.home() / ".cache" / "codemode"


def catalog_fingerprint(specs: Iterable[ToolSpec]) -> str:
    """A hash of everything search reads from the tools (and of the index format).

    ``marshal`` serializes the schemas about ten times faster than JSON; it follows dict order,
    so the same tools listed with their keys in another order only cost a rebuild."""
    digest = hashlib.sha256(f"codemode-search-{INDEX_FORMAT}".encode())
    for spec in specs:
        record: Any = (  # JSON values and tuples: all marshal can write
            spec.server,
            spec.name,
            spec.title,
            spec.description,
            spec.method,
            spec.path,
            spec.operation_id,
            tuple(spec.tags),
            spec.input_schema,
            # Only the return type's name reaches the index (the signature), not its schema.
            _return_shape(spec.output_schema),
        )
        try:
            digest.update(marshal.dumps(record, _MARSHAL_VERSION))
        except ValueError:  # a value marshal cannot write (not from JSON): fall back
            digest.update(json.dumps(record, sort_keys=True, default=str).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def _return_shape(schema: dict[str, Any] | None) -> tuple[object, ...] | None:
    if schema is None:
        return None
    kind = schema.get("type")
    return (tuple(kind) if isinstance(kind, list) else kind, schema.get("$ref"), "enum" in schema)


def file_stamp(path: Path) -> list[Any] | None:
    """``[path, size, mtime_ns]`` of a file, or None when it cannot be read."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return [str(path), stat.st_size, stat.st_mtime_ns]


def hit_to_json(hit: Hit) -> dict[str, Any]:
    return {name: getattr(hit, name) for name in (*_HIT_FIELDS, *_HTTP_FIELDS)}


def hit_from_json(data: dict[str, Any]) -> Hit:
    def optional(name: str) -> str | None:
        value = data.get(name)
        return None if value is None else str(value)

    return Hit(
        server=str(data["server"]),
        tool=str(data["tool"]),
        module=str(data["module"]),
        function=str(data["function"]),
        score=0.0,
        summary=str(data["summary"]),
        signature=str(data["signature"]),
        method=optional("method"),
        path=optional("path"),
        operation_id=optional("operation_id"),
    )


class StoredEntries(Sequence[Hit]):
    """Stored tools as hits, each made when first read (a search reads a handful of thousands)."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self._rows = rows
        self._hits: list[Hit | None] = [None] * len(rows)

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> Hit: ...

    @overload
    def __getitem__(self, index: slice) -> list[Hit]: ...

    def __getitem__(self, index: int | slice) -> Hit | list[Hit]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        hit = self._hits[index]
        if hit is None:
            hit = self._hits[index] = hit_from_json(self._rows[index])
        return hit


class IndexStore:
    """Persisted indexes under ``<root>/search``."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or default_cache_dir()) / "search"

    def directory(self, fingerprint: str) -> Path:
        return self.root / fingerprint

    def lexical_path(self, fingerprint: str) -> Path:
        return self.directory(fingerprint) / "lexical.sqlite"

    def vectors_path(self, fingerprint: str, model_key: str) -> Path:
        return self.directory(fingerprint) / f"vectors-{model_key}.npy"

    # --- tools and lexical index --------------------------------------------------------

    def load_entries(self, fingerprint: str) -> Sequence[Hit] | None:
        """The stored tools, or None when this fingerprint has no complete entry."""
        if not self.lexical_path(fingerprint).is_file():
            return None
        try:
            data = json.loads((self.directory(fingerprint) / "tools.json").read_text())
            if data.get("format") != INDEX_FORMAT:
                return None
            return StoredEntries(list(data["tools"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save_entries(self, fingerprint: str, entries: Sequence[Hit], lexical: Any) -> None:
        """Store the tools and the lexical index (an ``FtsIndex``; its ``save`` writes SQLite)."""
        directory = self.directory(fingerprint)
        try:
            private_dir(directory)
            body = {"format": INDEX_FORMAT, "tools": [hit_to_json(hit) for hit in entries]}
            private_write(directory / "tools.json", json.dumps(body).encode())
            partial = self.lexical_path(fingerprint).with_suffix(f".{os.getpid()}.tmp")
            lexical.save(partial)
            partial.replace(self.lexical_path(fingerprint))
        except OSError as error:
            log.warning("could not store the search index in %s: %s", directory, error)

    # --- vectors --------------------------------------------------------------------------

    def load_vectors(self, fingerprint: str, model_key: str, rows: int) -> StoredVectors | None:
        """The stored vectors of ``rows`` tools, checked from the file's header; mapped (and
        numpy imported) on their first ``load``, when a search needs them."""
        return stored_vectors(self.vectors_path(fingerprint, model_key), rows)

    def save_vectors(self, fingerprint: str, model_key: str, vectors: FloatArray) -> bool:
        """Store ``vectors``; False (and a warning) when they could not be."""
        import numpy as np

        path = self.vectors_path(fingerprint, model_key)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            private_dir(path.parent)
            with private_open(partial) as handle:
                np.save(handle, np.ascontiguousarray(vectors), allow_pickle=False)
            partial.replace(path)
        except OSError as error:
            log.warning("could not store search vectors in %s: %s", path.parent, error)
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
            return False
        return True

    def remove_vectors(self, fingerprint: str, model_key: str) -> None:
        """Drop vectors that others replace (a first stage once the whole index is stored)."""
        try:
            self.vectors_path(fingerprint, model_key).unlink(missing_ok=True)
        except OSError as error:
            log.warning("could not remove superseded search vectors: %s", error)

    # --- inputs -> fingerprint ------------------------------------------------------------

    def remember_inputs(self, key: str, fingerprint: str, watch: Iterable[Path]) -> None:
        """Record that these inputs gave this catalog, valid while ``watch`` files are unchanged."""
        stamps = [stamp for path in watch if (stamp := file_stamp(path)) is not None]
        body = {"format": INDEX_FORMAT, "fingerprint": fingerprint, "watch": stamps}
        path = self.root / "inputs" / f"{key}.json"
        try:
            private_dir(path.parent)
            private_write(path, json.dumps(body).encode())
        except OSError as error:
            log.warning("could not store the search input key in %s: %s", path.parent, error)

    def lookup_inputs(self, key: str) -> str | None:
        """The fingerprint recorded for these inputs, if none of its watched files changed."""
        try:
            data = json.loads((self.root / "inputs" / f"{key}.json").read_text())
            if data.get("format") != INDEX_FORMAT:
                return None
            for stamp in data["watch"]:
                if file_stamp(Path(stamp[0])) != stamp:
                    return None
            fingerprint = data["fingerprint"]
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None
        return fingerprint if isinstance(fingerprint, str) else None

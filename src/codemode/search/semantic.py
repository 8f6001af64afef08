"""Hybrid search: BM25 blended with MiniLM sentence embeddings, and the factory that picks an index.

Each tool's prose view (its summary and first sentence; ``DEFAULT_VIEWS``) is embedded once and
cached on disk, keyed by model and content hash: embedding 3,224 operations takes seconds to tens
of seconds on two cores, a cached load takes milliseconds. A whole index (tools, lexical table,
vectors) is also stored per catalog fingerprint (``store.IndexStore``), so a new process opens
it without reading the tools at all. A query is embedded at search time (a few ms,
then kept in a small LRU) and compared with every tool; the final score blends normalized BM25
with cosine similarity over the union of both candidate lists.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.errors import UsageError
from codemode.search.base import DEFAULT_LIMIT, Hit, SearchIndex
from codemode.search.documents import ToolDocument, tool_documents
from codemode.search.encoder import (
    INSTALL_HINT,
    MODEL_ID,
    Backend,
    MiniLMEncoder,
    QuerySession,
    model_dir,
    semantic_available,
)
from codemode.search.fts import FtsIndex
from codemode.search.store import IndexStore, catalog_fingerprint, default_cache_dir
from codemode.search.weights import model_variant
from codemode.storage.private import private_dir, private_open
from codemode.tools import ToolSpec

if TYPE_CHECKING:
    from codemode.search.arrays import FloatArray

__all__ = [
    "EmbeddingCache",
    "HybridIndex",
    "Progress",
    "build_index",
    "default_cache_dir",
    "open_stored_index",
    "vectors_key",
]

log = logging.getLogger("codemode.search")
_warned: list[bool] = []

# (stage, percent): "lexical", "embedding" or "ready", and how far that stage is.
Progress = Callable[[str, float], None]

# Tuned on the dev split (benchmarks/search_dev.json; see benchmarks/search.py).
DEFAULT_ALPHA = 0.2
DEFAULT_CANDIDATES = 100
DOCUMENT_MAX_TOKENS = 96
DEFAULT_GROUP_WEIGHT = 0.3
QUERY_CACHE_SIZE = 256
# Which of ``ToolDocument.semantic_texts`` are embedded and averaged: the prose view alone.
# Both views cost 2.6 times the tokens (136k + 82k over the three benchmark specs) for one task
# more on each split (default first answer: held-out 0.912 against 0.906, paraphrases 0.821
# both, dev 0.840 against 0.834; docs/search.md).
DEFAULT_VIEWS: tuple[int, ...] = (1,)


def model_key(encoder: MiniLMEncoder) -> str:
    """What vectors made by ``encoder`` are stored under: the model, its variant when it is not
    the pinned one, and the token limit."""
    return _model_key(encoder.max_length, encoder.variant)


def _model_key(max_length: int, variant: str) -> str:
    return f"{MODEL_ID}-{max_length}" + (f"-{variant}" if variant else "")


def vectors_key(model_key: str, views: Sequence[int]) -> str:
    """What a stored index's tool vectors are stored under: the model (``model_key``) and the
    views they average, so vectors made another way are never read as these."""
    return f"{model_key}-view{'+'.join(str(view) for view in views)}"


def _stored_model_key(cache_dir: Path) -> str | None:
    """``model_key`` of the encoder ``open_stored_index`` would make, without making it."""
    path = model_dir()
    if path is None:
        return None
    try:
        return _model_key(DOCUMENT_MAX_TOKENS, model_variant(path, cache_dir))
    except OSError:
        return None


class EmbeddingCache:
    """Vectors of a list of texts in ``<dir>/embeddings/``, one ``.npy`` file per list."""

    def __init__(self, directory: Path, model_key: str) -> None:
        self.directory = directory / "embeddings"
        self.model_key = model_key

    def path_for(self, texts: Sequence[str]) -> Path:
        digest = hashlib.sha256(self.model_key.encode())
        for text in texts:
            digest.update(text.encode())
            digest.update(b"\0")
        return self.directory / f"{self.model_key}-{digest.hexdigest()[:32]}.npy"

    def load(self, texts: Sequence[str]) -> FloatArray | None:
        import numpy as np

        path = self.path_for(texts)
        try:
            vectors: FloatArray = np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return None
        return vectors if vectors.shape[0] == len(texts) else None

    def store(self, texts: Sequence[str], vectors: FloatArray) -> None:
        import numpy as np

        path = self.path_for(texts)
        try:
            private_dir(self.directory)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            with private_open(partial) as handle:
                np.save(handle, vectors, allow_pickle=False)
            partial.replace(path)
        except OSError as error:  # a read-only home only costs speed next time
            log.warning("could not cache embeddings in %s: %s", self.directory, error)


class HybridIndex:
    """A ``SearchIndex``: BM25 (``FtsIndex``) and MiniLM cosine similarity, blended.

    A tool's vector is the mean of its ``views``' embeddings (indexes into
    ``ToolDocument.semantic_texts``) mixed with the mean vector of its group (its OpenAPI tag
    or first path word), so a query that names the product area lifts that area's tools. All
    of it is folded into one matrix at ``add`` time: a query costs one encoder pass and one
    matrix-vector product.
    """

    semantic = True

    def __init__(
        self,
        *,
        encoder: MiniLMEncoder | None = None,
        lexical: FtsIndex | None = None,
        cache_dir: Path | None = None,
        alpha: float = DEFAULT_ALPHA,
        candidates: int = DEFAULT_CANDIDATES,
        group_weight: float = DEFAULT_GROUP_WEIGHT,
        vectors: FloatArray | None = None,
        query_session: QuerySession = "now",
        views: Sequence[int] = DEFAULT_VIEWS,
    ) -> None:
        import numpy as np

        if not views:
            raise UsageError(
                "a semantic index needs at least one embedded view",
                fix=f"pass views={DEFAULT_VIEWS!r} (the default) or other indexes of "
                "ToolDocument.semantic_texts",
            )
        cache_dir = cache_dir or default_cache_dir()
        self.encoder = encoder or MiniLMEncoder(
            max_length=DOCUMENT_MAX_TOKENS, cache_dir=cache_dir, query_session=query_session
        )
        self.lexical = lexical or FtsIndex()
        self.alpha = alpha
        self.candidates = candidates
        self.group_weight = group_weight
        self.views = tuple(views)
        self._cache = EmbeddingCache(cache_dir, model_key(self.encoder))
        self._vectors: Any = (
            vectors
            if vectors is not None
            else np.zeros((0, self.encoder.dimension), dtype=np.float32)
        )
        self._queries: OrderedDict[str, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self.lexical)

    @property
    def documents(self) -> list[ToolDocument]:
        return self.lexical.documents

    @property
    def entries(self) -> Sequence[Hit]:
        return self.lexical.entries

    @property
    def vectors(self) -> FloatArray:
        return self._vectors  # type: ignore[no-any-return]

    def add(self, specs: Iterable[ToolSpec], progress: Progress | None = None) -> None:
        self.add_documents(tool_documents(specs), progress)

    def add_documents(
        self, documents: Sequence[ToolDocument], progress: Progress | None = None
    ) -> None:
        """Index ``documents``; ``progress("embedding", percent)`` follows the encoder."""
        self.lexical.add_documents(documents)
        self.embed_documents(documents, progress)

    def embed_documents(
        self, documents: Sequence[ToolDocument], progress: Progress | None = None
    ) -> None:
        """Append the vectors of ``documents`` (already in the lexical index, in this order);
        the encoder's document session is stopped after (queries do not need it)."""
        try:
            self._embed_documents(documents, progress)
        finally:
            self.encoder.release_documents_session()

    def _embed_documents(
        self, documents: Sequence[ToolDocument], progress: Progress | None = None
    ) -> None:
        import numpy as np

        # One cache entry per server and view, so adding a source does not re-embed the others.
        by_server: dict[str, list[ToolDocument]] = {}
        for document in documents:
            by_server.setdefault(document.spec.server, []).append(document)
        total = len(self.views) * len(documents) or 1
        done = 0

        def step(count: int) -> Callable[[int, int], None] | None:
            if progress is None:
                return None
            base = done
            return lambda finished, _all: progress("embedding", 100.0 * (base + finished) / total)

        for group in by_server.values():
            per_view = []
            for view in self.views:
                texts = [d.semantic_texts[view] for d in group]
                per_view.append(self._embed(texts, step(len(texts))))
                done += len(texts)
            vectors = np.mean(per_view, axis=0).astype(np.float32)
            vectors = self._with_groups(group, vectors)
            self._vectors = np.ascontiguousarray(
                np.vstack([self._vectors, vectors]), dtype=np.float32
            )
        if progress is not None:
            progress("embedding", 100.0)

    def _embed(
        self, texts: list[str], progress: Callable[[int, int], None] | None = None
    ) -> FloatArray:
        vectors = self._cache.load(texts)
        if vectors is None:
            vectors = self.encoder.encode(texts, progress=progress)
            self._cache.store(texts, vectors)
        return vectors

    def _with_groups(self, documents: Sequence[ToolDocument], vectors: FloatArray) -> FloatArray:
        import numpy as np

        if self.group_weight <= 0:
            return vectors
        members: dict[str, list[int]] = {}
        for i, document in enumerate(documents):
            if document.group:
                members.setdefault(document.group, []).append(i)
        centroids = vectors.copy()
        for rows in members.values():
            mean = vectors[rows].mean(axis=0)
            centroids[rows] = mean / max(float(np.linalg.norm(mean)), 1e-9)
        mixed = (vectors + self.group_weight * centroids) / (1 + self.group_weight)
        return mixed.astype(np.float32)

    def query_vector(self, query: str) -> FloatArray:
        """The query's embedding; the last ``QUERY_CACHE_SIZE`` queries are kept."""
        vector = self._queries.get(query)
        if vector is None:
            vector = self.encoder.encode_query(query)
            self._queries[query] = vector
            if len(self._queries) > QUERY_CACHE_SIZE:
                self._queries.popitem(last=False)
        else:
            self._queries.move_to_end(query)
        return vector

    def forget_queries(self) -> None:
        """Empty the query-embedding cache (benchmarks measure the uncached path with it)."""
        self._queries.clear()

    def scores(self, query: str) -> dict[int, float]:
        """Blended score per candidate position (lexical and semantic top lists, merged)."""
        import numpy as np

        if len(self) == 0:
            return {}
        # Not overlapped with the embedding in a thread: measured slower (the encoder's many short
        # numpy calls then wait for the GIL), 73 ms against 38 ms on a loaded machine.
        lexical = self.lexical.ranked(query, self.candidates)
        vector = self.query_vector(query)
        with self.encoder.blas_threads():
            cosine = self._vectors @ vector
        count = min(self.candidates, len(cosine))
        top = np.argpartition(-cosine, count - 1)[:count]
        best = lexical[0][1] if lexical else 1.0
        lexical_norm = {position: score / best for position, score in lexical}
        positions = set(lexical_norm) | set(top.tolist())
        return {
            p: self.alpha * lexical_norm.get(p, 0.0) + (1 - self.alpha) * float(cosine[p])
            for p in positions
        }

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[Hit]:
        if (named := self.lexical.named(query)) is not None:
            return [replace(hit, score=1.0) for hit in named[:limit]]
        ranked = sorted(self.scores(query).items(), key=lambda item: (-item[1], item[0]))
        entries = self.entries
        return [replace(entries[p], score=score) for p, score in ranked[:limit]]


def open_stored_index(
    fingerprint: str,
    *,
    semantic: bool,
    cache_dir: Path | None = None,
    encoder: MiniLMEncoder | None = None,
    backend: Backend = "auto",
    query_session: QuerySession = "now",
    views: Sequence[int] = DEFAULT_VIEWS,
) -> SearchIndex | None:
    """The index stored for ``fingerprint``, or None (nothing stored, or no vectors of these
    ``views`` for a semantic index). ``backend`` and ``query_session`` are the encoder's when
    none is given: "numpy" saves a process that answers one query importing ONNX Runtime and
    starting its session, but its float32 query weights can order near ties unlike the
    gateway's 8-bit ones."""
    cache_dir = cache_dir or default_cache_dir()
    store = IndexStore(cache_dir)
    entries = store.load_entries(fingerprint)
    if entries is None:
        return None
    if not semantic:
        return FtsIndex.open(store.lexical_path(fingerprint), entries)
    key = model_key(encoder) if encoder is not None else _stored_model_key(cache_dir)
    if key is None:
        return None
    vectors = store.load_vectors(fingerprint, vectors_key(key, views), len(entries))
    if vectors is None:
        return None
    encoder = encoder or MiniLMEncoder(
        max_length=DOCUMENT_MAX_TOKENS,
        cache_dir=cache_dir,
        backend=backend,
        query_session=query_session,
    )
    lexical = FtsIndex.open(store.lexical_path(fingerprint), entries)
    return HybridIndex(
        encoder=encoder, lexical=lexical, cache_dir=cache_dir, vectors=vectors, views=views
    )


def resolve_semantic(semantic: bool | None) -> bool:
    """``semantic=None``: on when the model is installed, else off (said once, with the fix)."""
    if semantic is not None:
        return semantic
    available = semantic_available()
    if not available and not _warned:
        _warned.append(True)
        log.warning("semantic search unavailable, searching lexically; to enable: %s", INSTALL_HINT)
    return available


def build_index(
    specs: Iterable[ToolSpec] = (),
    *,
    semantic: bool | None = None,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    persist: bool = True,
) -> SearchIndex:
    """The best index available: hybrid when the model is installed (``semantic=None``),
    lexical when asked (``semantic=False``) or when the optional dependencies are missing
    (logged once). ``semantic=True`` raises ``UsageError`` if they are missing.

    With ``persist`` the index is read from (or written to) the store under ``cache_dir``,
    keyed by the tools' fingerprint. Its 8-bit query session starts on the first search (a
    gateway nobody searches never holds it, nor ONNX Runtime)."""
    specs = list(specs)
    semantic = resolve_semantic(semantic)
    fingerprint = catalog_fingerprint(specs) if persist and specs else None
    if fingerprint is not None:
        stored = open_stored_index(
            fingerprint, semantic=semantic, cache_dir=cache_dir, query_session="first_query"
        )
        if stored is not None:
            if progress is not None:
                progress("ready", 100.0)
            return stored
    index: HybridIndex | FtsIndex = (
        HybridIndex(cache_dir=cache_dir, query_session="first_query") if semantic else FtsIndex()
    )
    if progress is not None:
        progress("lexical", 0.0)
    if isinstance(index, HybridIndex):
        index.add(specs, progress)
    else:
        index.add(specs)
    if fingerprint is not None:
        save_index(index, fingerprint, cache_dir)
    if progress is not None:
        progress("ready", 100.0)
    return index


def save_index(index: HybridIndex | FtsIndex, fingerprint: str, cache_dir: Path | None) -> None:
    store = IndexStore(cache_dir)
    lexical = index.lexical if isinstance(index, HybridIndex) else index
    store.save_entries(fingerprint, lexical.entries, lexical)
    if isinstance(index, HybridIndex):
        key = vectors_key(model_key(index.encoder), index.views)
        store.save_vectors(fingerprint, key, index.vectors)

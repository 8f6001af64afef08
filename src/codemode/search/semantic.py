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

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.errors import UsageError
from codemode.search.base import DEFAULT_LIMIT, Hit, SearchIndex
from codemode.search.documents import ToolDocument, tool_documents
from codemode.search.embedding_cache import EmbeddingCache
from codemode.search.encoder import (
    INSTALL_HINT,
    Backend,
    MiniLMEncoder,
    QuerySession,
    semantic_available,
)
from codemode.search.fts import FtsIndex
from codemode.search.keys import model_key, stored_model_key, vectors_key
from codemode.search.store import IndexStore, catalog_fingerprint, default_cache_dir
from codemode.search.stored_vectors import StoredVectors
from codemode.tools import ToolSpec

if TYPE_CHECKING:
    from codemode.search.arrays import FloatArray

__all__ = [
    "DEFAULT_VIEWS",
    "FIRST_VIEWS",
    "EmbeddingCache",
    "HybridIndex",
    "Progress",
    "build_index",
    "build_stages",
    "default_cache_dir",
    "model_key",
    "open_stored_index",
    "vectors_key",
]

log = logging.getLogger("codemode.search")
_warned: list[bool] = []

# (stage, percent): "lexical", "embedding", "names" or "ready", and how far that stage is.
Progress = Callable[[str, float], None]

# Tuned on the dev split (benchmarks/search_dev.json; see benchmarks/search.py).
DEFAULT_ALPHA = 0.2
DEFAULT_CANDIDATES = 100
DOCUMENT_MAX_TOKENS = 96
DEFAULT_GROUP_WEIGHT = 0.3
QUERY_CACHE_SIZE = 256
# Which of ``ToolDocument.semantic_texts`` are embedded and averaged: both (held-out r@5 0.725
# against 0.70 for the prose view alone). The prose view is 38% of their tokens, so a first
# build embeds it alone first (``FIRST_VIEWS``, the fast stage), answers from it, then adds the
# names view (``staged.build_stages``; docs/search.md).
DEFAULT_VIEWS: tuple[int, ...] = (0, 1)
FIRST_VIEWS: tuple[int, ...] = (1,)


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
        vectors: FloatArray | StoredVectors | None = None,
        query_session: QuerySession = "now",
        views: Sequence[int] = DEFAULT_VIEWS,
    ) -> None:
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
        # An array; stored vectors, mapped on the first search; or None: none yet.
        self._vectors: FloatArray | StoredVectors | None = vectors
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
        vectors = self._vectors
        if isinstance(vectors, StoredVectors):
            vectors = self._vectors = vectors.load()
        elif vectors is None:
            import numpy as np

            vectors = self._vectors = np.zeros((0, self.encoder.dimension), dtype=np.float32)
        return vectors

    def add(self, specs: Iterable[ToolSpec], progress: Progress | None = None) -> None:
        self.add_documents(tool_documents(specs), progress)

    def add_documents(
        self, documents: Sequence[ToolDocument], progress: Progress | None = None
    ) -> None:
        """Index ``documents``; ``progress("embedding", percent)`` follows the encoder."""
        self.lexical.add_documents(documents)
        self.embed_documents(documents, progress)

    def embed_documents(
        self,
        documents: Sequence[ToolDocument],
        progress: Progress | None = None,
        *,
        stage: str = "embedding",
        release: bool = True,
    ) -> None:
        """Append the vectors of ``documents`` (already in the lexical index, in this order),
        reporting ``progress(stage, percent)`` over the texts not cached yet; with ``release``
        the encoder's document session is stopped after (queries do not need it)."""
        try:
            self._embed_documents(documents, progress, stage)
        finally:
            if release:
                self.encoder.release_documents_session()

    def _embed_documents(
        self, documents: Sequence[ToolDocument], progress: Progress | None, stage: str
    ) -> None:
        import numpy as np

        # Keyed by what the encoder embeds in now: a failed 8-bit graph turns it to float32.
        key, before = model_key(self.encoder), self.vectors
        self._cache.model_key = key
        # One cache entry per server and view, so adding a source does not re-embed the others.
        by_server: dict[str, list[ToolDocument]] = {}
        for document in documents:
            by_server.setdefault(document.spec.server, []).append(document)
        plan = [
            (group, [(texts, self._cache.load(texts)) for texts in self._view_texts(group)])
            for group in by_server.values()
        ]
        total = sum(len(texts) for _, views in plan for texts, cached in views if cached is None)
        done = 0

        def step() -> Callable[[int, int], None] | None:
            if progress is None:
                return None
            base = done
            return lambda finished, _all: progress(stage, 100.0 * (base + finished) / total)

        for group, views in plan:
            per_view = []
            for texts, cached in views:
                vectors = cached
                if vectors is None:
                    vectors = self.encoder.encode_documents(texts, progress=step())
                    if model_key(self.encoder) != key:  # not mixed with the vectors before
                        self._vectors = before
                        self._embed_documents(documents, progress, stage)
                        return
                    self._cache.store(texts, vectors)
                    done += len(texts)
                per_view.append(vectors)
            vectors = np.mean(per_view, axis=0).astype(np.float32)
            vectors = self._with_groups(group, vectors)
            self._vectors = np.ascontiguousarray(
                np.vstack([self.vectors, vectors]), dtype=np.float32
            )
        if progress is not None:
            progress(stage, 100.0)

    def _view_texts(self, group: Sequence[ToolDocument]) -> list[list[str]]:
        return [[d.semantic_texts[view] for d in group] for view in self.views]

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
            cosine = self.vectors @ vector
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
    partial: bool = False,
) -> SearchIndex | None:
    """The index stored for ``fingerprint``, or None (nothing stored, or no vectors of these
    ``views`` for a semantic index). With ``partial``, a first stage stored alone (a build
    stopped between its stages) is returned too: its ``views`` then differ from ``views``.
    ``backend`` and ``query_session`` are the encoder's when none is given: "numpy" saves a
    process that answers one query importing ONNX Runtime and starting its session, but its
    float32 query weights can order near ties unlike the gateway's 8-bit ones."""
    cache_dir = cache_dir or default_cache_dir()
    store = IndexStore(cache_dir)
    entries = store.load_entries(fingerprint)
    if entries is None:
        return None
    if not semantic:
        return FtsIndex.open(store.lexical_path(fingerprint), entries)
    found = (
        (model_key(encoder), encoder.document_precision)
        if encoder is not None
        else stored_model_key(DOCUMENT_MAX_TOKENS, cache_dir)
    )
    if found is None:
        return None
    key, precision = found
    views = tuple(views)
    vectors = store.load_vectors(fingerprint, vectors_key(key, views), len(entries))
    first = first_stage(views)
    if vectors is None and partial and first is not None:
        views = first
        vectors = store.load_vectors(fingerprint, vectors_key(key, views), len(entries))
    if vectors is None:
        return None
    encoder = encoder or MiniLMEncoder(
        max_length=DOCUMENT_MAX_TOKENS,
        cache_dir=cache_dir,
        backend=backend,
        query_session=query_session,
        document_precision=precision,
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


def first_stage(views: Sequence[int]) -> tuple[int, ...] | None:
    """The views a build of ``views`` embeds and stores first (``FIRST_VIEWS``), or None when
    it has one stage only."""
    first = FIRST_VIEWS
    return first if set(first) < set(views) else None


def build_stages(
    documents: Sequence[ToolDocument],
    lexical: FtsIndex,
    *,
    cache_dir: Path | None = None,
    views: Sequence[int] = DEFAULT_VIEWS,
    fingerprint: str | None = None,
    progress: Progress | None = None,
    on_stage: Callable[[HybridIndex], None] | None = None,
    start: HybridIndex | None = None,
    query_session: QuerySession = "now",
    factory: Callable[..., HybridIndex] | None = None,
) -> HybridIndex:
    """Embed ``documents`` (already in ``lexical``, in this order) in stages: the prose view
    alone (``first_stage``, reported as "embedding"), then all ``views`` ("names"; the cached
    first view is read back, not embedded again), percentages over both. Each stage is stored
    under ``fingerprint`` (whole files renamed into place: a process stopped between stages
    leaves the first) and handed to ``on_stage``. ``start``: a first stage already made
    (stored by an earlier run); ``factory`` makes each stage's index (``HybridIndex``)."""
    views = tuple(views)
    first = first_stage(views)
    stages = [views] if first is None else [first, views]
    store = IndexStore(cache_dir) if fingerprint is not None else None
    if store is not None and fingerprint is not None and start is None:
        store.save_entries(fingerprint, lexical.entries, lexical)
    # Percentages over both stages, each view weighted by its characters (a proxy for tokens).
    weights = {view: sum(len(d.semantic_texts[view]) for d in documents) for view in views}
    total = sum(weights.values()) or 1
    index = start
    for number, stage_views in enumerate(stages):
        if index is not None and index.views == stage_views:
            continue
        before = stages[number - 1] if number else ()
        low = 100.0 * sum(weights[view] for view in before) / total
        high = 100.0 * sum(weights[view] for view in stage_views) / total
        index = (factory or HybridIndex)(
            encoder=index.encoder if index is not None else None,
            lexical=lexical,
            cache_dir=cache_dir,
            views=stage_views,
            query_session=query_session,
        )
        last = number == len(stages) - 1
        index.embed_documents(
            documents,
            _scaled(progress, low, high),
            stage="embedding" if number == 0 else "names",
            release=last,
        )
        if store is not None and fingerprint is not None:
            key = model_key(index.encoder)
            saved = store.save_vectors(fingerprint, vectors_key(key, stage_views), index.vectors)
            if saved and last and number > 0:
                store.remove_vectors(fingerprint, vectors_key(key, stages[0]))
        if on_stage is not None:
            on_stage(index)
    if progress is not None and len(stages) > 1:
        progress("embedding", 100.0)
    assert index is not None
    return index


def _scaled(progress: Progress | None, low: float, high: float) -> Progress | None:
    if progress is None:
        return None
    return lambda stage, percent: progress(stage, low + (high - low) * percent / 100.0)


def build_index(
    specs: Iterable[ToolSpec] = (),
    *,
    semantic: bool | None = None,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    persist: bool = True,
    on_stage: Callable[[SearchIndex], None] | None = None,
) -> SearchIndex:
    """The best index available: hybrid when the model is installed (``semantic=None``),
    lexical when asked (``semantic=False``) or when the optional dependencies are missing
    (logged once). ``semantic=True`` raises ``UsageError`` if they are missing.

    With ``persist`` the index is read from (or written to) the store under ``cache_dir``,
    keyed by the tools' fingerprint; a hybrid index is built in stages (``build_stages``; a
    first stage stored by an earlier run is completed), each handed to ``on_stage`` as it is
    ready. Its 8-bit query session starts on the first search, which also maps the stored
    vectors and the model's matrices (a gateway nobody searches never holds ONNX Runtime, nor
    numpy: about 12 MiB)."""
    specs = list(specs)
    semantic = resolve_semantic(semantic)
    fingerprint = catalog_fingerprint(specs) if persist and specs else None
    stored = None
    if fingerprint is not None:
        stored = open_stored_index(
            fingerprint,
            semantic=semantic,
            cache_dir=cache_dir,
            query_session="first_query",
            partial=True,
        )
        if stored is not None and getattr(stored, "views", DEFAULT_VIEWS) == DEFAULT_VIEWS:
            if progress is not None:
                progress("ready", 100.0)
            return stored
    if progress is not None:
        progress("lexical", 0.0)
    documents = tool_documents(specs)
    if isinstance(stored, HybridIndex):
        lexical = stored.lexical
    else:
        lexical = FtsIndex()
        lexical.add_documents(documents)
    index: SearchIndex = lexical
    if semantic:
        index = build_stages(
            documents,
            lexical,
            cache_dir=cache_dir,
            fingerprint=fingerprint,
            progress=progress,
            on_stage=on_stage,
            start=stored if isinstance(stored, HybridIndex) else None,
            query_session="first_query",
        )
    elif fingerprint is not None:
        save_index(lexical, fingerprint, cache_dir)
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

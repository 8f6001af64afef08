"""Lexical search re-ranked with sentence embeddings, and the factory that picks an index.

Each tool's short texts (summary with name and path words; summary with its first sentence) are
embedded once and the vectors are cached on disk, keyed by model and content hash: embedding
3,224 operations takes tens of seconds on two cores, a cached load takes milliseconds. A query
is embedded at search time (a few ms, then kept in a small LRU) and compared with every tool;
the final score blends normalized BM25 with cosine similarity over the union of both candidate
lists.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.search.base import DEFAULT_LIMIT, Hit, SearchIndex, hit_from_document
from codemode.search.documents import ToolDocument, tool_documents
from codemode.search.encoder import INSTALL_HINT, MODEL_ID, MiniLMEncoder, semantic_available
from codemode.search.fts import FtsIndex
from codemode.tools import ToolSpec

if TYPE_CHECKING:
    from codemode.search.encoder import FloatArray

__all__ = ["EmbeddingCache", "HybridIndex", "build_index", "default_cache_dir"]

log = logging.getLogger("codemode.search")
_warned: list[bool] = []

# Tuned on the dev split of benchmarks/search_tasks.json (see benchmarks/search.py).
DEFAULT_ALPHA = 0.2
DEFAULT_CANDIDATES = 100
DOCUMENT_MAX_TOKENS = 96
DEFAULT_GROUP_WEIGHT = 0.3
QUERY_CACHE_SIZE = 256


def default_cache_dir() -> Path:
    """``$CODEMODE_STATE_DIR``, else ``$XDG_CACHE_HOME/codemode``, else ``~/.cache/codemode``."""
    if state := os.environ.get("CODEMODE_STATE_DIR"):
        return Path(state)
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg) / "codemode"
    return Path.home() / ".cache" / "codemode"


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
            self.directory.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            with partial.open("wb") as handle:
                np.save(handle, vectors, allow_pickle=False)
            partial.replace(path)
        except OSError as error:  # a read-only home only costs speed next time
            log.warning("could not cache embeddings in %s: %s", self.directory, error)


class HybridIndex:
    """A ``SearchIndex``: BM25 (``FtsIndex``) and MiniLM cosine similarity, blended.

    A tool's vector is the mean of its views' embeddings (``ToolDocument.semantic_texts``)
    mixed with the mean vector of its group (its OpenAPI tag or first path word), so a query
    that names the product area lifts that area's tools. All of it is folded into one matrix
    at ``add`` time: a query costs one encoder pass and one matrix-vector product.
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
    ) -> None:
        import numpy as np

        self.encoder = encoder or MiniLMEncoder(max_length=DOCUMENT_MAX_TOKENS)
        self.lexical = lexical or FtsIndex()
        self.alpha = alpha
        self.candidates = candidates
        self.group_weight = group_weight
        model_key = f"{MODEL_ID}-{self.encoder.max_length}"
        self._cache = EmbeddingCache(cache_dir or default_cache_dir(), model_key)
        self._vectors: Any = np.zeros((0, self.encoder.dimension), dtype=np.float32)
        self._queries: OrderedDict[str, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self.lexical)

    @property
    def documents(self) -> list[ToolDocument]:
        return self.lexical.documents

    def add(self, specs: Iterable[ToolSpec]) -> None:
        import numpy as np

        documents = tool_documents(specs)
        # One cache entry per server and view, so adding a source does not re-embed the others.
        by_server: dict[str, list[ToolDocument]] = {}
        for document in documents:
            by_server.setdefault(document.spec.server, []).append(document)
        for group in by_server.values():
            views = min(len(d.semantic_texts) for d in group)
            vectors = np.mean(
                [self._embed([d.semantic_texts[v] for d in group]) for v in range(views)], axis=0
            ).astype(np.float32)
            vectors = self._with_groups(group, vectors)
            self.lexical.add_documents(group)
            self._vectors = np.ascontiguousarray(
                np.vstack([self._vectors, vectors]), dtype=np.float32
            )

    def _embed(self, texts: list[str]) -> FloatArray:
        vectors = self._cache.load(texts)
        if vectors is None:
            vectors = self.encoder.encode(texts)
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
            vector = self.encoder.encode([query])[0]
            self._queries[query] = vector
            if len(self._queries) > QUERY_CACHE_SIZE:
                self._queries.popitem(last=False)
        else:
            self._queries.move_to_end(query)
        return vector  # type: ignore[no-any-return]

    def forget_queries(self) -> None:
        """Empty the query-embedding cache (benchmarks measure the uncached path with it)."""
        self._queries.clear()

    def scores(self, query: str) -> dict[int, float]:
        """Blended score per candidate position (lexical and semantic top lists, merged)."""
        import numpy as np

        if len(self) == 0:
            return {}
        lexical = self.lexical.ranked(query, self.candidates)
        cosine = self._vectors @ self.query_vector(query)
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
        ranked = sorted(self.scores(query).items(), key=lambda item: (-item[1], item[0]))
        return [hit_from_document(self.documents[p], score) for p, score in ranked[:limit]]


def build_index(
    specs: Iterable[ToolSpec] = (),
    *,
    semantic: bool | None = None,
    cache_dir: Path | None = None,
) -> SearchIndex:
    """The best index available: hybrid when the model is installed (``semantic=None``),
    lexical when asked (``semantic=False``) or when the optional dependencies are missing
    (logged once). ``semantic=True`` raises ``UsageError`` if they are missing."""
    index: SearchIndex
    if semantic is None:
        semantic = semantic_available()
        if not semantic and not _warned:
            _warned.append(True)
            log.warning(
                "semantic search unavailable, searching lexically; to enable: %s", INSTALL_HINT
            )
    index = HybridIndex(cache_dir=cache_dir) if semantic else FtsIndex()
    index.add(specs)
    return index

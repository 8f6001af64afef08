"""An index that answers at once: lexically while the semantic vectors are built in the background.

Embedding thousands of tools takes tens of seconds on the first use of a catalog (later starts
read them from the store). ``LiveIndex.start()`` makes the lexical index ready (stored or built,
about a second for the three big specs) and builds the vectors in a thread, reporting
``progress(stage, percent)``. Until they are ready every answer is lexical and says so
(``SearchResult.status``). The vectors come in two stages (``semantic.build_stages``): the prose
view first (38% of the tokens), answered from as soon as it is ready ("prose"), then the names
view beside it (the whole index, "hybrid"). It also carries the ``UsageLog`` (learning from
use), when given.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from codemode.search.base import DEFAULT_LIMIT, Hit
from codemode.search.documents import ToolDocument, tool_documents
from codemode.search.fts import FtsIndex
from codemode.search.semantic import (
    DEFAULT_VIEWS,
    HybridIndex,
    Progress,
    build_stages,
    open_stored_index,
    resolve_semantic,
    save_index,
)
from codemode.search.store import catalog_fingerprint
from codemode.search.usage import UsageLog
from codemode.tools import ToolSpec

__all__ = ["LiveIndex", "SearchResult", "SearchStatus"]

log = logging.getLogger("codemode.search")

Mode = Literal["hybrid", "prose", "lexical", "building"]
# Learned boosts re-order this many hits from the index before the limit is applied.
_USAGE_POOL = 30


@dataclass(frozen=True, slots=True)
class SearchStatus:
    """``mode``: "hybrid" (ready), "prose" (semantic on each tool's prose view while the names
    view is added), "lexical" (no model installed, or failed), "building" (lexical answers while
    the first vectors are made). ``percent``: how much of the vectors is made."""

    mode: Mode
    percent: float = 100.0
    error: str | None = None

    @property
    def note(self) -> str | None:
        """One sentence for the answer when it is not the full semantic search, else None."""
        if self.mode == "building":
            return (
                f"Semantic index still building ({self.percent:.0f}%): these results are "
                "lexical (word matches) only; search again shortly for better ranking."
            )
        if self.mode == "prose" and self.error:
            return (
                f"Adding tool names to the semantic index failed ({self.error}): these results "
                "are ranked on the tools' descriptions only."
            )
        if self.mode == "prose":
            return (
                "Semantic index on the tools' descriptions only while their names are added "
                f"({self.percent:.0f}% built): search again shortly for the full ranking."
            )
        if self.error:
            return f"Semantic search failed ({self.error}): these results are lexical only."
        return None


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: list[Hit]
    status: SearchStatus


class LiveIndex:
    """A ``SearchIndex`` over ``specs``: call ``start()`` once, then ``search`` at any time."""

    def __init__(
        self,
        specs: Sequence[ToolSpec],
        *,
        semantic: bool | None = None,
        cache_dir: Path | None = None,
        progress: Progress | None = None,
        usage: UsageLog | None = None,
        persist: bool = True,
        views: Sequence[int] = DEFAULT_VIEWS,
    ) -> None:
        self._specs = list(specs)
        self._semantic = semantic
        self._cache_dir = cache_dir
        self._progress = progress
        self.usage = usage
        self._persist = persist
        self._views = tuple(views)
        self.fingerprint = catalog_fingerprint(self._specs)
        self._lexical: FtsIndex | None = None
        self._hybrid: HybridIndex | None = None
        self._status = SearchStatus("lexical")
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def semantic(self) -> bool:
        return self._hybrid is not None

    def __len__(self) -> int:
        return len(self._specs)

    @property
    def status(self) -> SearchStatus:
        return self._status

    def add(self, specs: Sequence[ToolSpec]) -> None:
        raise TypeError("a LiveIndex is built from its specs once; build a new one instead")

    def start(self) -> LiveIndex:
        """Ready the lexical index now; build (or load) the vectors in a background thread."""
        semantic = resolve_semantic(self._semantic)
        stored = (
            open_stored_index(
                self.fingerprint,
                semantic=semantic,
                cache_dir=self._cache_dir,
                views=self._views,
                partial=True,
            )
            if self._persist and self._specs
            else None
        )
        documents = None
        if isinstance(stored, HybridIndex):
            self._hybrid, self._lexical = stored, stored.lexical
            if stored.views == self._views:
                self._finish(SearchStatus("hybrid"))
                return self
            # A build stopped after its first stage: answer from it, add the rest.
            self._status = SearchStatus("prose", 0.0)
        else:
            documents = tool_documents(self._specs)
            lexical = FtsIndex()
            lexical.add_documents(documents)
            self._lexical = lexical
            self._report("lexical", 100.0)
            if not semantic:
                if self._persist and self._specs:
                    save_index(lexical, self.fingerprint, self._cache_dir)
                self._finish(SearchStatus("lexical"))
                return self
            self._status = SearchStatus("building", 0.0)
        self._thread = threading.Thread(
            target=self._build, args=(documents,), name="codemode-search-index", daemon=True
        )
        self._thread.start()
        return self

    def _build(self, documents: list[ToolDocument] | None) -> None:
        assert self._lexical is not None
        start = self._hybrid

        def step(stage: str, percent: float) -> None:
            self._status = SearchStatus("building" if self._hybrid is None else "prose", percent)
            self._report(stage, percent)

        def ready(index: HybridIndex) -> None:
            self._hybrid = index
            if index.views != self._views:
                self._status = SearchStatus("prose", self._status.percent)

        try:
            hybrid = build_stages(
                documents if documents is not None else tool_documents(self._specs),
                self._lexical,
                cache_dir=self._cache_dir,
                views=self._views,
                fingerprint=self.fingerprint if self._persist and self._specs else None,
                progress=step,
                on_stage=ready,
                start=start,
                factory=HybridIndex,
            )
        except Exception as error:  # noqa: BLE001 - any failure leaves lexical search working
            # A failure after the first stage keeps its semantic answers.
            mode: Mode = "prose" if self._hybrid is not None else "lexical"
            log.warning("semantic index failed, searching with what is ready: %s", error)
            self._finish(SearchStatus(mode, error=str(error)))
            return
        self._hybrid = hybrid
        self._finish(SearchStatus("hybrid"))

    def _finish(self, status: SearchStatus) -> None:
        self._status = status
        self._ready.set()
        self._report("ready", 100.0)

    def _report(self, stage: str, percent: float) -> None:
        if self._progress is not None:
            try:
                self._progress(stage, percent)
            except Exception:
                log.exception("search progress listener failed")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the vectors are ready (or failed); False when ``timeout`` ran out."""
        return self._ready.wait(timeout)

    def answer(self, query: str, limit: int = DEFAULT_LIMIT) -> SearchResult:
        """Hits and how they were found (hybrid, or lexical while building)."""
        status = self._status
        hybrid = self._hybrid
        index = hybrid if hybrid is not None else self._lexical
        if index is None:
            raise RuntimeError("LiveIndex.start() was not called")
        if self.usage is None or not len(self.usage):
            return SearchResult(index.search(query, limit), status)
        vector = hybrid.query_vector(query) if hybrid is not None else None
        hits = self.usage.rerank(query, index.search(query, max(limit, _USAGE_POOL)), vector)
        return SearchResult(hits[:limit], status)

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[Hit]:
        return self.answer(query, limit).hits

    def forget_queries(self) -> None:
        """Empty the query-embedding cache (benchmarks measure the uncached path with it)."""
        if self._hybrid is not None:
            self._hybrid.forget_queries()

    def record_use(self, query: str, server: str, tool: str, success: bool) -> None:
        """Learn that ``tool`` was called after ``query`` (no-op without a ``UsageLog``)."""
        if self.usage is None:
            return
        vector = self._hybrid.query_vector(query) if self._hybrid is not None else None
        self.usage.record_use(query, server, tool, success, vector=vector)

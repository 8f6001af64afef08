"""The search seam: an index of tools that answers a query with ranked ``Hit``s."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from codemode.search.documents import ToolDocument, tool_documents
from codemode.search.hit import Hit
from codemode.search.text import expand_query, terms
from codemode.tools import ToolSpec

__all__ = ["DEFAULT_LIMIT", "Hit", "MemoryIndex", "SearchIndex", "hit_from_document"]

DEFAULT_LIMIT = 5


def hit_from_document(document: ToolDocument, score: float) -> Hit:
    spec = document.spec
    return Hit(
        server=spec.server,
        tool=spec.name,
        module=document.module,
        function=document.function,
        score=score,
        summary=document.summary,
        signature=document.signature,
        method=spec.method.upper() if spec.method else None,
        path=spec.path,
        operation_id=spec.operation_id,
    )


@runtime_checkable
class SearchIndex(Protocol):
    """Tools go in with ``add``; ``search`` returns at most ``limit`` hits, best first."""

    def add(self, specs: Iterable[ToolSpec]) -> None: ...

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[Hit]: ...


class MemoryIndex:
    """The in-memory twin for tests: counts query words (and synonyms) found in each tool."""

    def __init__(self) -> None:
        self._documents: list[tuple[ToolDocument, Counter[str]]] = []

    def __len__(self) -> int:
        return len(self._documents)

    def add(self, specs: Iterable[ToolSpec]) -> None:
        for document in tool_documents(specs):
            words = Counter(terms(" ".join(document.fields), drop_stopwords=True))
            self._documents.append((document, words))

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[Hit]:
        wanted = expand_query(query)
        scored: list[tuple[float, int, ToolDocument]] = []
        for position, (document, words) in enumerate(self._documents):
            score = sum(
                1.0 if words[word] else 0.5 if any(words[s] for s in synonyms) else 0.0
                for word, synonyms in wanted
            )
            if score > 0:
                scored.append((-score, position, document))
        scored.sort(key=lambda item: (item[0], item[1]))
        return [hit_from_document(doc, -neg) for neg, _, doc in scored[:limit]]

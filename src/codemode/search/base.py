"""The search seam: an index of tools that answers a query with ranked ``Hit``s."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from codemode.search.documents import ToolDocument, tool_documents
from codemode.search.text import expand_query, terms
from codemode.tools import ToolSpec

__all__ = ["DEFAULT_LIMIT", "Hit", "MemoryIndex", "SearchIndex", "hit_from_document"]

DEFAULT_LIMIT = 5


@dataclass(frozen=True, slots=True)
class Hit:
    """One tool found by a search. ``module.function`` is how sandbox code calls it."""

    server: str
    tool: str
    module: str
    function: str
    score: float
    summary: str
    signature: str
    method: str | None = None
    path: str | None = None
    operation_id: str | None = None

    @property
    def python_name(self) -> str:
        return f"{self.module}.{self.function}"

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "server": self.server,
            "tool": self.tool,
            "python_name": self.python_name,
            "score": round(self.score, 6),
            "summary": self.summary,
            "signature": self.signature,
        }
        if self.method is not None:
            data |= {"method": self.method, "path": self.path, "operation_id": self.operation_id}
        return data


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

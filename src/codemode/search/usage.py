"""Learning from use: tools called after a search, in executions that succeeded, rank higher for
similar queries next time.

Bounded (the newest ``capacity`` uses are kept), decaying (a use counts half after
``half_life_s``), and capped (a tool gains at most ``max_boost`` on top of its score, so what was
learned re-orders close candidates but cannot bury a clearly better match). Similarity between
queries is the cosine of their embeddings when the index has them, else the overlap of their
words. Off unless a ``UsageLog`` is given to the index (the benchmark runs without it).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.search.base import Hit
from codemode.search.text import terms
from codemode.storage.private import private_dir, private_write

if TYPE_CHECKING:
    from codemode.search.arrays import FloatArray

__all__ = ["Use", "UsageLog"]

_FORMAT = 1


@dataclass(frozen=True, slots=True)
class Use:
    words: frozenset[str]
    vector: tuple[float, ...] | None
    server: str
    tool: str
    weight: float  # +1 for a call in an execution that succeeded, -0.5 for a failed one
    at: float  # seconds since the epoch


class UsageLog:
    def __init__(
        self,
        *,
        capacity: int = 2000,
        half_life_s: float = 14 * 86400.0,
        max_boost: float = 0.15,
        min_similarity: float = 0.5,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if capacity < 1 or half_life_s <= 0 or max_boost < 0:
            raise ValueError("capacity >= 1, half_life_s > 0 and max_boost >= 0 are required")
        self.half_life_s = half_life_s
        self.max_boost = max_boost
        self.min_similarity = min_similarity
        self._clock = clock
        self._uses: deque[Use] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        # The uses' query vectors as one matrix, made again only after the log changed.
        self._version = 0
        self._matrix: tuple[int, tuple[list[int], Any]] | None = None

    def __len__(self) -> int:
        return len(self._uses)

    def record_use(
        self,
        query: str,
        server: str,
        tool: str,
        success: bool,
        *,
        vector: FloatArray | None = None,
    ) -> None:
        """``tool`` of ``server`` was called by code written after searching ``query``."""
        words = frozenset(terms(query, drop_stopwords=True))
        if not words and vector is None:
            return
        stored = tuple(float(x) for x in vector) if vector is not None else None
        use = Use(words, stored, server, tool, 1.0 if success else -0.5, self._clock())
        with self._lock:
            self._uses.append(use)
            self._version += 1

    def boost(self, query: str, server: str, tool: str, vector: FloatArray | None = None) -> float:
        """What ``tool`` gains for ``query`` (between ``-max_boost`` and ``max_boost``)."""
        return self._boosts(query, vector).get((server, tool), 0.0)

    def rerank(
        self, query: str, hits: Sequence[Hit], vector: FloatArray | None = None
    ) -> list[Hit]:
        """``hits`` with learned boosts added to their scores, best first."""
        boosts = self._boosts(query, vector)
        if not boosts:
            return list(hits)
        boosted = [
            replace(hit, score=hit.score + boosts.get((hit.server, hit.tool), 0.0)) for hit in hits
        ]
        order = sorted(range(len(boosted)), key=lambda i: (-boosted[i].score, i))
        return [boosted[i] for i in order]

    def _boosts(self, query: str, vector: FloatArray | None) -> dict[tuple[str, str], float]:
        with self._lock:
            uses = list(self._uses)
            version, cached = self._version, self._matrix
        if not uses:
            return {}
        words = frozenset(terms(query, drop_stopwords=True))
        matrix = None
        if vector is not None:
            if cached is None or cached[0] != version or cached[1][1].shape[-1] != len(vector):
                cached = (version, _vector_matrix(uses, len(vector)))
                with self._lock:
                    self._matrix = cached
            matrix = cached[1]
        cosines = _cosines(vector, matrix, len(uses))
        now = self._clock()
        raw: dict[tuple[str, str], float] = {}
        for cosine, use in zip(cosines, uses, strict=True):
            similarity = cosine if cosine is not None else _overlap(words, use.words)
            if similarity < self.min_similarity:
                continue
            decay = 0.5 ** (max(0.0, now - use.at) / self.half_life_s)
            key = (use.server, use.tool)
            raw[key] = raw.get(key, 0.0) + use.weight * similarity * decay
        return {key: self.max_boost * math.tanh(value) for key, value in raw.items() if value}

    # --- persistence ---------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            uses = list(self._uses)
        return {
            "format": _FORMAT,
            "uses": [
                {
                    "words": sorted(u.words),
                    "vector": list(u.vector) if u.vector is not None else None,
                    "server": u.server,
                    "tool": u.tool,
                    "weight": u.weight,
                    "at": u.at,
                }
                for u in uses
            ],
        }

    def load_json(self, data: dict[str, Any]) -> None:
        """Add the uses of ``to_json``'s output (ignored when its format is unknown)."""
        if data.get("format") != _FORMAT:
            return
        with self._lock:
            for item in data.get("uses", []):
                vector = item.get("vector")
                self._version += 1
                self._uses.append(
                    Use(
                        frozenset(item["words"]),
                        tuple(vector) if vector is not None else None,
                        str(item["server"]),
                        str(item["tool"]),
                        float(item["weight"]),
                        float(item["at"]),
                    )
                )

    def save(self, path: Path) -> None:
        private_dir(path.parent)
        private_write(path, json.dumps(self.to_json()).encode())

    def load(self, path: Path) -> None:
        """Read what ``save`` wrote; a missing or unreadable file leaves the log as it is."""
        try:
            self.load_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return


def _vector_matrix(uses: Sequence[Use], dimension: int) -> tuple[list[int], Any]:
    """``(rows, matrix)``: which uses have a query vector of ``dimension``, and those vectors."""
    import numpy as np

    rows = [i for i, u in enumerate(uses) if u.vector is not None and len(u.vector) == dimension]
    matrix = np.asarray([uses[i].vector for i in rows], dtype=np.float32)
    return rows, matrix


def _cosines(
    vector: FloatArray | None, matrix: tuple[list[int], Any] | None, count: int
) -> list[float | None]:
    """Cosine of ``vector`` with each use's query vector (None where either is missing)."""
    out: list[float | None] = [None] * count
    if vector is None or matrix is None or not matrix[0]:
        return out
    import numpy as np

    rows, vectors = matrix
    for i, value in zip(
        rows, (vectors @ np.asarray(vector, dtype=np.float32)).tolist(), strict=True
    ):
        out[i] = float(value)
    return out


def _overlap(words: frozenset[str], other: frozenset[str]) -> float:
    if not words or not other:
        return 0.0
    return len(words & other) / len(words | other)

"""``Hit``: one tool a search found. Its own module so that answering from a stored index (the
CLI's fast path, the search daemon's client) imports nothing else of search."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Hit"]


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

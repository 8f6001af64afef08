"""Approvals as typed objects: what a paused execution asks a human, and what the human said.

Modelled on pydantic-ai's deferred tool calls: an ``ApprovalRequest`` travels out with the
``approval_required`` result (its ``to_dict`` is the JSON the client sees), and an
``ApprovalDecision`` comes back to the engine naming the request it answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from codemode.policy.grants import ApprovalAnswer, Remember

__all__ = ["ApprovalDecision", "ApprovalRequest", "Approver", "ValuesSent"]


@dataclass(frozen=True, slots=True)
class ValuesSent:
    """Hidden values the call would send: their tokens by the server they came from (the
    values themselves never reach the client)."""

    to: str
    origins: dict[str, list[str]]

    def to_dict(self) -> dict[str, Any]:
        return {"to": self.to, "from": {key: list(tokens) for key, tokens in self.origins.items()}}


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A tool call paused until a human answers: the call as the code made it (arguments as
    shown, private values still tokenized), why it waits, and the digest an approval quotes."""

    id: str
    # "server.tool"
    tool: str
    arguments: Any
    reason: str
    # SHA-256 of the canonical JSON of the arguments shown; "" when nothing was shown yet.
    digest: str = ""
    # Length of that JSON (None: not measured, and not shown).
    chars: int | None = None
    values: ValuesSent | None = None
    # Long arguments: the file holding them whole (``arguments`` is then a preview) ...
    file: str | None = None
    # ... or, without a file, their JSON cut into pages.
    pages: list[str] | None = None

    @property
    def server(self) -> str:
        return self.tool.split(".", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form the client sees (``approval`` in an ``approval_required`` result)."""
        data: dict[str, Any] = {
            "id": self.id,
            "tool": self.tool,
            "arguments": self.arguments,
            "digest": self.digest,
        }
        if self.chars is not None:
            data["chars"] = self.chars
        data["reason"] = self.reason
        if self.values is not None:
            data["values"] = self.values.to_dict()
        if self.file is not None:
            data["file"] = self.file
        if self.pages is not None:
            data["pages"] = list(self.pages)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApprovalRequest:
        values = data.get("values")
        return cls(
            id=str(data["id"]),
            tool=str(data["tool"]),
            arguments=data.get("arguments"),
            reason=str(data.get("reason", "")),
            digest=str(data.get("digest", "")),
            chars=int(data["chars"]) if "chars" in data else None,
            values=(
                ValuesSent(str(values.get("to", "")), dict(values.get("from", {})))
                if isinstance(values, Mapping)
                else None
            ),
            file=data.get("file"),
            pages=data.get("pages"),
        )


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """A human's answer to one ``ApprovalRequest``. An approval quotes the digest of what was
    shown (the engine refuses it if the call changed since); a denial needs none."""

    approval_id: str
    allow: bool
    # How long an approval holds: this call, this tool or this server (for the session).
    remember: Remember = "call"
    digest: str | None = None
    # Who decided (the owner the engine checks the approval against); None: anyone.
    decided_by: str | None = field(default=None)

    @classmethod
    def answering(
        cls, request: ApprovalRequest, answer: ApprovalAnswer, decided_by: str | None = None
    ) -> ApprovalDecision:
        """The decision ``answer`` makes about ``request``: an approval quotes its digest."""
        return cls(
            request.id,
            answer.allow,
            answer.remember if answer.allow else "call",
            (request.digest or None) if answer.allow else None,
            decided_by,
        )


class Approver(Protocol):
    """Something that decides an approval request: a person at a terminal, a page, a rule.
    True allows the call; an ``ApprovalAnswer`` also says how long it holds. May be async."""

    def __call__(
        self, request: ApprovalRequest, /
    ) -> bool | ApprovalAnswer | Awaitable[bool] | Awaitable[ApprovalAnswer]: ...

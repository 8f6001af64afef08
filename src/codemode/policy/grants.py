"""Remembered approvals: ``approve(..., remember="tool")`` or ``"server"`` lets later calls of
the same scope run without asking again.

Grants belong to one session (its chain of wrappers holds them), so they never reach another
session or another owner, and they end with the session. A grant covers the hidden values of
the servers the approved call carried, and no others: a later call that would send data from a
new server still asks.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from codemode.policy.flowgate import FlowAsk
from codemode.tools import ToolCall

__all__ = [
    "REMEMBER_CHOICES",
    "ApprovalAnswer",
    "CallKind",
    "Grant",
    "Grants",
    "Remember",
    "ScopedApprovalGate",
]

Remember = Literal["call", "tool", "server"]
REMEMBER_CHOICES: tuple[Remember, ...] = ("call", "tool", "server")
CallKind = Literal["read-only", "destructive"]


@dataclass(frozen=True, slots=True)
class ApprovalAnswer:
    allow: bool
    remember: Remember = "call"


@runtime_checkable
class ScopedApprovalGate(Protocol):
    """An approval gate that also shows the values a call carries and hears how long the
    answer holds. Gates with only ``request`` answer for one call at a time."""

    def ask(self, call: ToolCall, *, reason: str, flows: FlowAsk | None) -> ApprovalAnswer: ...


@dataclass(frozen=True, slots=True)
class Grant:
    scope: Literal["tool", "server"]
    # "server.tool" for a tool grant, "server" for a server grant.
    target: str
    # A server grant covers that server's calls of this kind only.
    kind: CallKind
    # The servers whose hidden values the approved call carried.
    origins: frozenset[str]
    granted_at: float

    @property
    def label(self) -> str:
        what = self.target if self.scope == "tool" else f"{self.kind} calls of {self.target}"
        return f"remembered approval ({self.scope}: {what})"

    def covers(self, call: ToolCall, kind: CallKind, origins: frozenset[str]) -> bool:
        if not origins <= self.origins:
            return False
        if self.scope == "tool":
            return self.target == f"{call.server}.{call.tool}"
        return self.target == call.server and self.kind == kind

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "target": self.target,
            "kind": self.kind,
            "values_from": sorted(self.origins),
            "granted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.granted_at)),
        }


class Grants:
    """One session's remembered approvals. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._grants: list[Grant] = []

    def remember(
        self, remember: Remember, call: ToolCall, kind: CallKind, origins: frozenset[str]
    ) -> Grant | None:
        if remember == "call":
            return None
        target = f"{call.server}.{call.tool}" if remember == "tool" else call.server
        grant = Grant(remember, target, kind, origins, time.time())
        with self._lock:
            self._grants.append(grant)
        return grant

    def find(self, call: ToolCall, kind: CallKind, origins: frozenset[str]) -> Grant | None:
        with self._lock:
            for grant in self._grants:
                if grant.covers(call, kind, origins):
                    return grant
        return None

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return [grant.to_dict() for grant in self._grants]

    def __len__(self) -> int:
        with self._lock:
            return len(self._grants)

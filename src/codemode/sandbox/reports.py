"""Typed reports an execution result carries beside its output: a restore from a checkpoint,
a cancelled execution before this one, a session lost with its node.

Each is set by the layer that knows it and shown to the client as the JSON of ``to_dict``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

__all__ = ["CancelReport", "Restore", "SessionLoss"]

Scan = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Restore:
    """The session continued from its checkpoint: after an idle release or a lost sandbox."""

    files: list[str]
    variables: list[str]
    reason: Literal["idle", "lost"]
    # When the checkpoint was taken (seconds since the epoch); None when it was not read.
    taken_at: float | None = None
    # Why nothing was restored (the session starts empty).
    error: str | None = None
    # The packages the session had installed, installed again in the new sandbox.
    packages: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"files": list(self.files), "variables": list(self.variables)}
        if self.packages:
            data["packages"] = list(self.packages)
        if self.taken_at is not None:
            data["taken_at"] = self.taken_at
        data["reason"] = self.reason
        if self.error is not None:
            data["error"] = self.error
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Restore:
        return cls(
            list(data.get("files", [])),
            list(data.get("variables", [])),
            "idle" if data.get("reason") == "idle" else "lost",
            data.get("taken_at"),
            data.get("error"),
            [str(name) for name in data.get("packages", [])],
        )

    def scanned(self, scan_value: Scan) -> Restore:
        """File and variable names and the error through a privacy scan."""
        return replace(
            self,
            files=scan_value(self.files),
            variables=scan_value(self.variables),
            error=None if self.error is None else scan_value(self.error),
            packages=scan_value(self.packages),
        )


@dataclass(frozen=True, slots=True)
class CancelReport:
    """What a cancelled execution did, reported with the next result in its session."""

    status: str
    tool_calls: dict[str, Any]
    refused_after_cancel: int
    stdout: str
    error: dict[str, Any] | None
    sandbox_reset: bool
    duration_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "tool_calls": self.tool_calls,
            "refused_after_cancel": self.refused_after_cancel,
            "stdout": self.stdout,
            "error": self.error,
            "sandbox_reset": self.sandbox_reset,
            "duration_ms": self.duration_ms,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CancelReport:
        return cls(
            str(data["status"]),
            dict(data.get("tool_calls", {})),
            int(data.get("refused_after_cancel", 0)),
            str(data.get("stdout", "")),
            data.get("error"),
            bool(data.get("sandbox_reset", False)),
            float(data.get("duration_ms", 0.0)),
        )


@dataclass(frozen=True, slots=True)
class SessionLoss:
    """The node holding the session's sandbox was lost (cluster backend)."""

    node: str | None
    # Whether the execution had started running before the loss (its output so far is kept).
    ran: bool

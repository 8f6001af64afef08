"""Learning from a session's own fixes: a failure, then a success with changed code.

``FixLearner`` watches one session's executions. When code fails and a later execution of a
changed version of it succeeds, it stores the error's signature with a short diff; when an
error with a known signature comes back, it returns the earlier fix for the result's hint.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from codemode.memory.fixes import FixMemory
from codemode.memory.signature import error_signature
from codemode.sandbox.result import ExecutionResult

__all__ = ["FixLearner", "short_diff"]

_MAX_DIFF_LINES = 24
_MAX_DIFF_CHARS = 1500
# A success counts as the fix only when it is recognisably the same code, changed.
_MIN_SIMILARITY = 0.5
# Failures still waiting for a fix, per session (the oldest is dropped first).
_PENDING_FAILURES = 4


def short_diff(before: str, after: str) -> str:
    """The changed lines only (no context), bounded, without file headers."""
    lines = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if not line.startswith(("---", "+++", "@@"))
    ]
    text = "\n".join(lines[:_MAX_DIFF_LINES])
    if len(lines) > _MAX_DIFF_LINES:
        text += f"\n... ({len(lines) - _MAX_DIFF_LINES} more changed lines)"
    return text[:_MAX_DIFF_CHARS]


class FixLearner:
    """Failures wait for their fix across a few executions: an agent often looks around
    (prints a value, tries a smaller step) between the failure and the code that fixes it."""

    def __init__(self, memory: FixMemory, owner: str | None, scrub: Callable[[str], str]) -> None:
        self.memory = memory
        self.owner = owner or "-"
        self.scrub = scrub
        self._failed: list[tuple[str, str]] = []  # (signature, code) of recent failures

    def observe(self, code: str, result: ExecutionResult) -> str | None:
        """Learn from this execution; returns an earlier fix to show, if the error is known."""
        if result.status == "error":
            signature = error_signature(result.error)
            if signature is None:
                return None
            self._failed = [entry for entry in self._failed if entry[0] != signature]
            self._failed = [*self._failed, (signature, code)][-_PENDING_FAILURES:]
            known = self.memory.recall(self.owner, signature)
            return known.diff if known is not None else None
        if result.status == "ok" and self._failed:
            waiting: list[tuple[str, str]] = []
            for signature, failed in self._failed:
                similar = difflib.SequenceMatcher(None, failed, code).ratio() >= _MIN_SIMILARITY
                diff = short_diff(failed, code) if similar else ""
                if diff:
                    self.memory.remember(self.owner, signature, self.scrub(diff))
                else:
                    waiting.append((signature, failed))  # not this one's fix: keep waiting
            self._failed = waiting
        return None

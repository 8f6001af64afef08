"""Every import of a skill and every execution that used it, counted in a key-value store.

Counts live in the state store (in memory or Redis, written through to SQLite), not in the
skill's folder: they change on every use, and the folder is for people and git.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from codemode.errors import StateStoreError
from codemode.skills.model import Skill
from codemode.state.store import KeyValueStore

__all__ = ["SkillUsage", "Usage"]

log = logging.getLogger(__name__)

_KINDS = ("imports", "ok", "failed")


@dataclass(frozen=True)
class Usage:
    imports: int = 0
    ok: int = 0
    failed: int = 0

    @property
    def success_rate(self) -> float:
        """Laplace-smoothed: a new skill starts at 0.5, each outcome moves it."""
        return (self.ok + 1) / (self.ok + self.failed + 2)

    def describe(self) -> str:
        runs = self.ok + self.failed
        if not runs and not self.imports:
            return "not used yet"
        return f"imported {self.imports}x, {self.ok}/{runs} executions ok"


class SkillUsage:
    """Counting is best effort: a store that is away is logged, never fails an execution."""

    def __init__(self, store: KeyValueStore) -> None:
        self.store = store

    @staticmethod
    def _key(skill: Skill, kind: str) -> str:
        return f"skill:{skill.owner}/{skill.name}:{kind}"

    def _incr(self, skill: Skill, kind: str) -> None:
        try:
            self.store.incr(self._key(skill, kind))
        except StateStoreError as error:
            log.warning("skill usage of %s not counted: %s", skill.key, error.message)

    def imported(self, skill: Skill) -> None:
        self._incr(skill, "imports")

    def ran(self, skill: Skill, ok: bool) -> None:
        self._incr(skill, "ok" if ok else "failed")

    def of(self, skill: Skill) -> Usage:
        counts = []
        try:
            for kind in _KINDS:
                found = self.store.get(self._key(skill, kind))
                counts.append(int(found.data) if found is not None else 0)
        except StateStoreError as error:
            log.warning("skill usage of %s unavailable: %s", skill.key, error.message)
            return Usage()
        return Usage(*counts)

    def forget(self, skill: Skill) -> None:
        self.store.delete_prefix(f"skill:{skill.owner}/{skill.name}:")

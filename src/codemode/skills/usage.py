"""Every import of a skill and every execution that used it, counted in a key-value store.

Counts live in the state store (in memory or Redis, written through to SQLite), not in the
skill's folder: they change on every use, and the folder is for people and git.
"""

from __future__ import annotations

from dataclasses import dataclass

from codemode.skills.model import Skill
from codemode.state.store import KeyValueStore

__all__ = ["SkillUsage", "Usage"]

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
    def __init__(self, store: KeyValueStore) -> None:
        self.store = store

    @staticmethod
    def _key(skill: Skill, kind: str) -> str:
        return f"skill:{skill.owner}/{skill.name}:{kind}"

    def imported(self, skill: Skill) -> None:
        self.store.incr(self._key(skill, "imports"))

    def ran(self, skill: Skill, ok: bool) -> None:
        self.store.incr(self._key(skill, "ok" if ok else "failed"))

    def of(self, skill: Skill) -> Usage:
        counts = []
        for kind in _KINDS:
            found = self.store.get(self._key(skill, kind))
            counts.append(int(found.data) if found is not None else 0)
        return Usage(*counts)

    def forget(self, skill: Skill) -> None:
        self.store.delete_prefix(f"skill:{skill.owner}/{skill.name}:")

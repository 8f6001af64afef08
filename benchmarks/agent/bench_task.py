"""A task of the suite: what to ask, how to set up the world, how to check it, and reference
answers for both paradigms (lists of steps, built from the world so paths are right)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench_world import World

Check = Callable[[World], str | None]  # None when the world is right, else what is wrong


@dataclass(frozen=True)
class Task:
    id: str
    prompt: str  # may use {workspace} and {repo}
    check: Check
    codemode: Callable[[World], list[Any]]
    baseline: Callable[[World], list[Any]]
    setup: Callable[[World], None] = lambda world: None
    tags: tuple[str, ...] = field(default=())
    # The servers of this task's world; empty: all of them (the suite's large catalog).
    servers: tuple[str, ...] = field(default=())

    def text(self, world: World) -> str:
        return self.prompt.format(workspace=world.workspace, repo=world.repo)


def expect(condition: bool, problem: str) -> str | None:
    return None if condition else problem


def first_problem(*problems: str | None) -> str | None:
    return next((p for p in problems if p), None)
